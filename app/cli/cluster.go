package cli

import "github.com/talosflash/talosflash/app/plan"

// loadCluster is a command's settings and its cluster (plan's
// Settings.Cluster): the inventory's members at port, else the members of
// the addresses typed; a typo in one is a usage error (plan.InputError),
// nothing looked up.
func loadCluster(d plan.Defaults, port int, addresses ...string) (*plan.Settings, *plan.Cluster, error) {
	s, err := loadSettings(d)
	if err != nil {
		return nil, nil, err
	}
	c, err := s.Cluster(port, addresses...)
	return s, c, err
}
