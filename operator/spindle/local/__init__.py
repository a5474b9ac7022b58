"""The local body: the same lifecycle as the operator, on a laptop, with no cluster."""
