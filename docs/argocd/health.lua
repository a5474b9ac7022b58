-- Argo CD health check for spindle.dev/Pipeline (resource.customizations.health.spindle.dev_Pipeline)
local hs = {}
local status = obj.status
if status == nil or status.observedGeneration == nil
    or obj.metadata.generation == nil or status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for Spindle to observe the latest spec"
  return hs
end
local reason = ""
local ready = nil
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    if condition.type == "Ready" then
      reason = (condition.reason or "") .. ": " .. (condition.message or "")
      ready = condition.status
    end
  end
end
if status.phase == "AwaitingApproval" then
  local id = ""
  if status.pendingChange ~= nil and status.pendingChange.id ~= nil then
    id = status.pendingChange.id
  end
  hs.status = "Suspended"
  hs.message = "Change " .. id .. " awaits approval: annotate spindle.dev/approve=" .. id
  if status.pendingChange ~= nil and status.pendingChange.estimate ~= nil then
    hs.message = hs.message .. " (" .. (status.pendingChange.estimate.headline or "") .. ")"
  end
  return hs
end
if status.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = reason
  return hs
end
if status.phase == "Running" and ready == "False" then
  -- the driver runs but waits to retry a step that storage refused (StepRetrying)
  hs.status = "Degraded"
  hs.message = reason
  return hs
end
if status.phase == "Running" then
  hs.status = "Healthy"
  hs.message = "Running"
  return hs
end
hs.status = "Progressing"
hs.message = (status.phase or "Pending") .. " " .. reason
return hs
