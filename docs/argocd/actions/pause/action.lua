-- Pause ingestion: spec.desiredState Paused (the driver restarts at a checkpoint, paused).
obj.spec.desiredState = "Paused"
return obj
