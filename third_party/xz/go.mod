module github.com/talosflash/talosflash/third_party/xz

go 1.20
