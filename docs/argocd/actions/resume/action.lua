-- Resume ingestion: spec.desiredState Running.
obj.spec.desiredState = "Running"
return obj
