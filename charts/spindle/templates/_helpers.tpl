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
{{- $enabled := toString .Values.leaderElection.enabled -}}
{{- if not (has $enabled (list "auto" "true" "false")) -}}
{{- fail (printf "leaderElection.enabled must be auto, true or false (got %q)" $enabled) -}}
{{- end -}}
{{- if and (eq $enabled "false") (gt (int .Values.replicas) 1) -}}
{{- fail "leaderElection.enabled=false needs replicas: 1 (two operators must never both reconcile)" -}}
{{- end -}}
{{- $l := .Values.leaderElection -}}
{{- if not (and (lt (int $l.retryPeriodSeconds) (int $l.renewDeadlineSeconds)) (lt (int $l.renewDeadlineSeconds) (int $l.leaseDurationSeconds))) -}}
{{- fail (printf "leaderElection needs retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds (got %v, %v, %v)" $l.retryPeriodSeconds $l.renewDeadlineSeconds $l.leaseDurationSeconds) -}}
{{- end -}}
{{- end -}}
{{- define "spindle.leaderElection" -}}
{{- include "spindle.validate" . -}}
{{- $enabled := toString .Values.leaderElection.enabled -}}
{{- if or (eq $enabled "true") (and (eq $enabled "auto") (gt (int .Values.replicas) 1)) }}true{{ end -}}
{{- end -}}
{{- define "spindle.leaseName" -}}{{ .Release.Name }}-spindle-operator{{- end -}}
