// The pod sandbox's pause process, built here because no registry serves the usual image.
module spindle.dev/harness/pause

go 1.24.0
