-- Argo CD health check for llmbench.io/LLMBenchmark (docs/gitops.md).
-- argocd-cm: data["resource.customizations.health.llmbench.io_LLMBenchmark"] = this script.
-- Argo CD passes the resource as `obj`; the script returns `hs` with `status` and `message`.
local function condition(conditions, type_)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == type_ then
      return c
    end
  end
  return nil
end

local function said(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.type .. ": " .. c.message
  end
  return fallback
end

hs = {}
if obj.status == nil or obj.status.phase == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the operator"
  return hs
end

local st = obj.status
local accepted = condition(st.conditions, "Accepted")
local valid = condition(st.conditions, "MeasurementValid")
local regressed = condition(st.conditions, "Regressed")

if accepted ~= nil and accepted.status == "False" then
  hs.status = "Degraded"
  hs.message = said(accepted, "the spec was not accepted")
  return hs
end
if st.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = st.message or ("a run of the new spec is due (phase " .. st.phase .. ")")
  return hs
end
if st.phase == "Pending" or st.phase == "Queued" or st.phase == "Running" then
  hs.status = "Progressing"
  hs.message = st.message or ("phase " .. st.phase)
  return hs
end
if st.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = st.message or "the run failed"
  return hs
end
if regressed ~= nil and regressed.status == "True" then
  hs.status = "Degraded"
  hs.message = said(regressed, "the last run regressed")
  return hs
end
if valid ~= nil and valid.status == "False" then
  hs.status = "Degraded"
  hs.message = said(valid, "the measurement is not valid")
  return hs
end
if st.phase == "Succeeded" and valid ~= nil and valid.status == "True" then
  hs.status = "Healthy"
  hs.message = "run " .. tostring(st.run) .. " succeeded with a valid measurement"
  return hs
end
hs.status = "Degraded"
hs.message = "phase " .. st.phase .. " without MeasurementValid=True"
return hs
