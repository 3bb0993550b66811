// The package is Linux only (udiskstest.go); this file lets every
// platform list it.

package udiskstest
