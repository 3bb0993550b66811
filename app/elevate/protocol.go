package elevate

import "strconv"

// Args is what the elevated child is told: write the image it receives
// on its stdin (SendImage, ReceiveImage) to Devices (one card is a list of
// one; one --device each). The child gets everything else through its
// arguments (pkexec clears the environment). It runs as root on whatever
// it is told, so it is told only this: no path to read (not even the
// image's), no --force-raw (a root copy of any bytes onto a disk that is
// not a disk image), nothing it would read for the parent (profiles,
// inventory, cache, factory).
type Args struct {
	Devices           []string
	NoVerify          bool
	ForceNonRemovable bool
	AllowLoop         bool
	// Meta, per device in order, is the node META to write after the
	// verify (app/plan's encoded CardMeta; "" for none): the values, never
	// the inventory's path.
	Meta []string
	// Images, per device in order, is the index of the image on stdin the
	// card is written from, when there are several (SendImages: a
	// cluster's control plane and workers in one run); nil: one image.
	Images []int
}

// List is the child's command line after the program name.
func (a Args) List() []string {
	args := []string{"--flash", "--elevated"}
	devs := a.Devices
	for _, d := range devs {
		args = append(args, "--device", d)
	}
	for i, m := range a.Meta {
		if m != "" && i < len(devs) {
			args = append(args, "--node-meta", devs[i]+"="+m)
		}
	}
	for i, n := range a.Images {
		if i < len(devs) {
			args = append(args, "--card-image", devs[i]+"="+strconv.Itoa(n))
		}
	}
	args = append(args, "--yes", "--json")
	if a.NoVerify {
		args = append(args, "--no-verify")
	}
	if a.ForceNonRemovable {
		args = append(args, "--force-non-removable")
	}
	if a.AllowLoop {
		args = append(args, "--allow-loop")
	}
	return args
}

// ChildFlags are the only flags the elevated child accepts: exactly those
// List emits (after "--flash"), each true when List always emits it. The
// child refuses any other before it opens anything.
var ChildFlags = map[string]bool{
	"elevated": true, "device": true, "yes": true, "json": true,
	"node-meta": false, "card-image": false, "no-verify": false, "force-non-removable": false, "allow-loop": false,
}

// Human is the same write as a command for a person to run as root, on
// the image file image: without the child protocol (--elevated, --json,
// --yes), so it asks for confirmation and draws its progress. One image:
// Images is left out.
func (a Args) Human(image string) []string {
	args := []string{"--flash", "--image", image}
	a.Images = nil
	for _, f := range a.List()[1:] {
		switch f {
		case "--elevated", "--json", "--yes":
			continue
		}
		args = append(args, f)
	}
	return args
}
