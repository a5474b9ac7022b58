-- Argo CD resource actions for spindle.dev/Pipeline (resource.customizations.actions.spindle.dev_Pipeline)
-- approve: only while a change awaits approval, the latest spec is observed, and that change is
-- not approved yet. pause: only while desiredState is Running. resume: only while it is Paused.
-- restart: only while the latest spec's driver has failed (a new spec.restartNonce retries it).
local actions = {}
actions["approve"] = {["disabled"] = true}
actions["pause"] = {["disabled"] = true}
actions["resume"] = {["disabled"] = true}
actions["restart"] = {["disabled"] = true}

local status = obj.status
local generation = obj.metadata.generation
if status ~= nil and status.phase == "AwaitingApproval"
    and status.pendingChange ~= nil and status.pendingChange.id ~= nil and status.pendingChange.id ~= ""
    and status.observedGeneration ~= nil and generation ~= nil and status.observedGeneration >= generation then
  local approved = nil
  if obj.metadata.annotations ~= nil then
    approved = obj.metadata.annotations["spindle.dev/approve"]
  end
  if approved ~= status.pendingChange.id then
    actions["approve"]["disabled"] = false
  end
end

local desired = "Running"
if obj.spec ~= nil and obj.spec.desiredState ~= nil then
  desired = obj.spec.desiredState
end
if desired == "Running" then
  actions["pause"]["disabled"] = false
elseif desired == "Paused" then
  actions["resume"]["disabled"] = false
end

if status ~= nil and status.phase == "Failed" and status.driverPod ~= nil
    and status.driverPod.phase == "Failed"
    and status.observedGeneration ~= nil and generation ~= nil and status.observedGeneration >= generation then
  actions["restart"]["disabled"] = false
end
return actions
