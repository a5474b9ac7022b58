-- Approve the pending change: annotate spindle.dev/approve with status.pendingChange.id.
if obj.status == nil or obj.status.phase ~= "AwaitingApproval"
    or obj.status.pendingChange == nil or obj.status.pendingChange.id == nil then
  error("no change awaits approval", 0)
end
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["spindle.dev/approve"] = obj.status.pendingChange.id
return obj
