//go:build unix

package devices

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cliDir makes a directory holding an "app" and a fake talosflash-cli that
// prints `talosflash <version>` like the real one.
func cliDir(t *testing.T, version string) (app, cli string) {
	t.Helper()
	dir := t.TempDir()
	app = filepath.Join(dir, "talosflash")
	cli = filepath.Join(dir, CLIName)
	writeFakeCLI(t, app, "9.9.9-not-asked")
	writeFakeCLI(t, cli, version)
	return app, cli
}

func writeFakeCLI(t *testing.T, path, version string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho 'talosflash "+version+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// The elevated write runs the CLI beside the app only when it is the same
// build's and nobody but root or the app's owner can have put it there.
func TestElevatedProgramPicksOnlyATrustedCLIOfTheSameVersion(t *testing.T) {
	const version = "1.2.3"
	t.Run("sibling of the same version", func(t *testing.T) {
		app, cli := cliDir(t, version)
		if got := ElevatedProgram(app, version, []string{cli}); got != cli {
			t.Fatalf("ElevatedProgram = %s, want the CLI %s (%v)", got, cli, UsableCLI(app, version, cli))
		}
	})
	t.Run("the CLI of the same make build", func(t *testing.T) {
		const dev = "0.1.0-dev+1764770000000000001" // make build's stamp, the same in both
		app, cli := cliDir(t, dev)
		if got := ElevatedProgram(app, dev, []string{cli}); got != cli {
			t.Fatalf("ElevatedProgram = %s, want the CLI %s (%v)", got, cli, UsableCLI(app, dev, cli))
		}
	})
	t.Run("second candidate when the first is missing", func(t *testing.T) {
		app, cli := cliDir(t, version)
		if got := ElevatedProgram(app, version, []string{filepath.Join(t.TempDir(), CLIName), cli}); got != cli {
			t.Fatalf("ElevatedProgram = %s, want %s", got, cli)
		}
	})

	refused := map[string]func(t *testing.T) (app, cli, version string){
		"other version": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, "1.2.2")
			return app, cli, version
		},
		"version only a prefix": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, "1.2.3.1")
			return app, cli, version
		},
		"dev build": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, "0.1.0-dev")
			return app, cli, "0.1.0-dev"
		},
		"dev build of another make build": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, "0.1.0-dev+1764770000000000001")
			return app, cli, "0.1.0-dev+1764770000000000002"
		},
		"dev build with a constant suffix": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, "0.1.0-dev+local")
			return app, cli, "0.1.0-dev+local"
		},
		"dev build with an empty stamp": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, "0.1.0-dev+")
			return app, cli, "0.1.0-dev+"
		},
		"stamped app, unstamped dev CLI": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, "0.1.0-dev")
			return app, cli, "0.1.0-dev+1764770000000000002"
		},
		"no version": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, "")
			return app, cli, ""
		},
		"missing": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			if err := os.Remove(cli); err != nil {
				t.Fatal(err)
			}
			return app, cli, version
		},
		"not executable": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			if err := os.Chmod(cli, 0o644); err != nil {
				t.Fatal(err)
			}
			return app, cli, version
		},
		"world-writable": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			if err := os.Chmod(cli, 0o757); err != nil {
				t.Fatal(err)
			}
			return app, cli, version
		},
		"group-writable": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			if err := os.Chmod(cli, 0o775); err != nil {
				t.Fatal(err)
			}
			return app, cli, version
		},
		"in a directory others can write": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			if err := os.Chmod(filepath.Dir(cli), 0o777); err != nil {
				t.Fatal(err)
			}
			return app, cli, version
		},
		"symlink to elsewhere": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			elsewhere := filepath.Join(t.TempDir(), CLIName)
			writeFakeCLI(t, elsewhere, version)
			if err := os.Remove(cli); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, cli); err != nil {
				t.Fatal(err)
			}
			return app, cli, version
		},
		"a directory": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			if err := os.Remove(cli); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(cli, 0o755); err != nil {
				t.Fatal(err)
			}
			return app, cli, version
		},
		"the app itself": func(t *testing.T) (string, string, string) {
			app, _ := cliDir(t, version)
			writeFakeCLI(t, app, version)
			return app, app, version
		},
		"fails to run": func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			if err := os.WriteFile(cli, []byte("#!/bin/sh\necho 'talosflash "+version+"'\nexit 2\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			return app, cli, version
		},
	}
	if os.Geteuid() == 0 {
		// Owners: only root can give files away.
		refused["owned by another user"] = func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			chown(t, app, 1000)
			chown(t, cli, 1001)
			return app, cli, version
		}
		refused["user-owned beside a root-owned app"] = func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			chown(t, cli, 1000)
			return app, cli, version
		}
		refused["in a directory another user owns"] = func(t *testing.T) (string, string, string) {
			app, cli := cliDir(t, version)
			chown(t, app, 1000)
			chown(t, cli, 1000)
			chown(t, filepath.Dir(cli), 1001)
			return app, cli, version
		}
		t.Run("owned by the app's owner", func(t *testing.T) {
			app, cli := cliDir(t, version)
			chown(t, app, 1000)
			chown(t, cli, 1000)
			if got := ElevatedProgram(app, version, []string{cli}); got != cli {
				t.Fatalf("ElevatedProgram = %s, want %s (%v)", got, cli, UsableCLI(app, version, cli))
			}
		})
		t.Run("root-owned beside a user's app", func(t *testing.T) {
			app, cli := cliDir(t, version)
			chown(t, app, 1000)
			if got := ElevatedProgram(app, version, []string{cli}); got != cli {
				t.Fatalf("ElevatedProgram = %s, want %s (%v)", got, cli, UsableCLI(app, version, cli))
			}
		})
	} else {
		t.Log("not root: the owner cases need chown and are not run")
	}
	for name, setup := range refused {
		t.Run(name, func(t *testing.T) {
			app, cli, v := setup(t)
			err := UsableCLI(app, v, cli)
			if err == nil {
				t.Fatalf("UsableCLI(%s) = nil, want a refusal", cli)
			}
			t.Log(err)
			if got := ElevatedProgram(app, v, []string{cli}); got != app {
				t.Fatalf("ElevatedProgram = %s, want the app %s", got, app)
			}
		})
	}
}

// ElevatedCommandFor runs the CLI found beside the running executable with
// the child's arguments unchanged; ElevatedCommandFor("") re-runs the app.
func TestElevatedCommandForRunsTheSiblingCLI(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(filepath.Dir(exe), CLIName)
	if _, err := os.Lstat(cli); err == nil {
		t.Skipf("%s exists already", cli)
	}
	writeFakeCLI(t, cli, "1.2.3")
	t.Cleanup(func() { os.Remove(cli) })
	if err := UsableCLI(exe, "1.2.3", cli); err != nil {
		t.Skipf("the test binary's directory does not qualify: %v", err)
	}
	args := []string{"--flash", "--elevated", "--json", "--image", "/home/u/.cache/talos.raw", "--device", "/dev/sdz"}
	for version, want := range map[string]string{"1.2.3": cli, "1.2.4": exe, "": exe} {
		cmd, err := ElevatedCommandFor(version)(args)
		var line string
		switch e := err.(type) {
		case nil:
			line = strings.Join(cmd.Args, " ")
		case *ElevationError: // no pkexec here
			line = e.Command
		default:
			t.Fatal(err)
		}
		if !strings.Contains(line, want+" "+strings.Join(args, " ")) {
			t.Errorf("version %q: elevated command %q, want %s with the same arguments", version, line, want)
		}
	}
}
