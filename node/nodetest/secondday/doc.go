// Package secondday holds the end-to-end test of the whole second day on
// the fakes, run as a user runs it by hand: talosflash-cli, fakefactory and
// fakenode built and started as programs, three cards flashed from an
// inventory, fakenode booting a node from each, apply with the bootstrap,
// the kubeconfig, a CNI (fakenode's SIGUSR1), the rolling upgrade to the
// next release with drains, every node back Ready. Only 127.0.0.0/8.
package secondday
