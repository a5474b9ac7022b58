{{- define "spindle.name" -}}spindle-operator{{- end -}}
{{- define "spindle.labels" -}}
app.kubernetes.io/name: spindle
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{- define "spindle.selector" -}}
app.kubernetes.io/name: spindle
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "spindle.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- define "spindle.sparkImage" -}}
{{ .Values.sparkImage.repository }}:{{ .Values.sparkImage.tag | default .Chart.AppVersion }}
{{- end -}}
{{- define "spindle.driverNamespaces" -}}
{{- include "spindle.validate" . -}}
{{- if .Values.watchNamespaces }}{{ join "," .Values.watchNamespaces }}{{ else }}{{ .Release.Namespace }}{{ end -}}
{{- end -}}
{{- /* Values a template cannot use as given fail the install with what to write instead;
every template that reads them includes this first. */ -}}
{{- define "spindle.validate" -}}
{{- if and .Values.watchNamespaces (not (kindIs "slice" .Values.watchNamespaces)) -}}
{{- fail (printf "watchNamespaces must be a list, e.g. --set 'watchNamespaces={%v}' (got %q)" .Values.watchNamespaces (toString .Values.watchNamespaces)) -}}
{{- end -}}
{{- range $key, $secrets := dict "imagePullSecrets" .Values.imagePullSecrets "driver.imagePullSecrets" .Values.driver.imagePullSecrets -}}
{{- $named := or (not $secrets) (kindIs "slice" $secrets) -}}
{{- if $named }}{{ range $secrets }}{{ if not (kindIs "map" .) }}{{ $named = false }}{{ else if not (get . "name") }}{{ $named = false }}{{ end }}{{ end }}{{ end -}}
{{- if not $named -}}
{{- fail (printf "%s must be a list of Secret names as {name: ...}, e.g. --set '%s[0].name=regcred' (got %s)" $key $key (toJson $secrets)) -}}
{{- end -}}
{{- end -}}
{{- $enabled := toString .Values.leaderElection.enabled -}}
{{- if not (has $enabled (list "auto" "true" "false")) -}}
{{- fail (printf "leaderElection.enabled must be auto, true or false (got %q)" $enabled) -}}
{{- end -}}
{{- if and (eq $enabled "false") (gt (int .Values.replicas) 1) -}}
{{- fail "leaderElection.enabled=false needs replicas: 1 (two operators must never both reconcile)" -}}
{{- end -}}
{{- $l := .Values.leaderElection -}}
{{- if not (and (gt (float64 $l.retryPeriodSeconds) 0.0) (lt (float64 $l.retryPeriodSeconds) (float64 $l.renewDeadlineSeconds)) (lt (float64 $l.renewDeadlineSeconds) (float64 $l.leaseDurationSeconds))) -}}
{{- fail (printf "leaderElection needs 0 < retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds (got %v, %v, %v)" $l.retryPeriodSeconds $l.renewDeadlineSeconds $l.leaseDurationSeconds) -}}
{{- end -}}
{{- with .Values.defaultStorage -}}
{{- if and .endpoint (not (regexMatch "^https?://[^\\s/?#]+(/\\S*)?$" (toString .endpoint))) -}}
{{- fail (printf "defaultStorage.endpoint must be a URL, e.g. http://minio.storage:9000 (got %q)" (toString .endpoint)) -}}
{{- end -}}
{{- if and .uri (not (regexMatch "^(?i)s3a?://" (toString .uri))) -}}
{{- fail (printf "defaultStorage.uri must be object storage, s3://bucket/prefix: the operator and its driver pods do not share a file system (got %q)" (toString .uri)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- define "spindle.leaderElection" -}}
{{- include "spindle.validate" . -}}
{{- $enabled := toString .Values.leaderElection.enabled -}}
{{- if or (eq $enabled "true") (and (eq $enabled "auto") (gt (int .Values.replicas) 1)) }}true{{ end -}}
{{- end -}}
{{- define "spindle.leaseName" -}}{{ .Release.Name }}-spindle-operator{{- end -}}
