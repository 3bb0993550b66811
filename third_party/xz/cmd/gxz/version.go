package main

const version = "v0.5.16"
