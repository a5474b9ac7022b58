-- Start a failed driver again from the last checkpoint: a new spec.restartNonce (nothing else reads it).
local status = obj.status
if status == nil or status.phase ~= "Failed" or status.driverPod == nil
    or status.driverPod.phase ~= "Failed" or status.observedGeneration == nil
    or obj.metadata.generation == nil or status.observedGeneration < obj.metadata.generation then
  error("no driver of the current spec has failed", 0)
end
local nonce = 0
if obj.spec.restartNonce ~= nil then
  nonce = obj.spec.restartNonce
end
obj.spec.restartNonce = nonce + 1
return obj
