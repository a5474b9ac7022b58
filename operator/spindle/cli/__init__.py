"""Command-line entry points: `spindle` and `kubectl-spindle`."""
