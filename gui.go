package main

// runGUI is replaced when the GUI package lands.
func runGUI() int { return 0 }
