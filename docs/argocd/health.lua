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
local code = ""
local ready = nil
if status.conditions ~= nil then
  for _, condition in ipairs(status.conditions) do
    if condition.type == "Ready" then
      code = condition.reason or ""
      reason = code .. ": " .. (condition.message or "")
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
local retrying = (status.phase == "Running" or status.phase == "Paused") and ready == "False"
local rejected = status.phase == "Stopped" and code ~= "Stopped"
local stalled = code == "DriverUnschedulable" or code == "DriverTerminating"
if retrying or rejected or stalled then
  -- the driver waits to retry a step that storage refused (StepRetrying), or stopped without
  -- its spec asking: bootstrapPolicy reject refused a change (BootstrapRejected), or no node
  -- can take its pod, or its node does not end it once deleted
  hs.status = "Degraded"
  hs.message = reason
  return hs
end
if status.phase == "Running" then
  hs.status = "Healthy"
  hs.message = "Running"
  return hs
end
if status.phase == "Paused" then
  -- what spec.desiredState asks for: the driver runs and ingests nothing until resumed
  hs.status = "Suspended"
  hs.message = "Ingestion is paused (spec.desiredState: Paused); resume sets it to Running"
  return hs
end
if status.phase == "Stopped" then
  hs.status = "Suspended"
  hs.message = "Stopped: spec.desiredState is Stopped"
  return hs
end
hs.status = "Progressing"
hs.message = (status.phase or "Pending") .. " " .. reason
return hs
