-- Start a failed driver again from the last checkpoint: a new spec.restartNonce (nothing else reads it).
if obj.status == nil or obj.status.phase ~= "Failed" or obj.status.driverPod == nil then
  error("no driver has failed", 0)
end
local nonce = 0
if obj.spec.restartNonce ~= nil then
  nonce = obj.spec.restartNonce
end
obj.spec.restartNonce = nonce + 1
return obj
