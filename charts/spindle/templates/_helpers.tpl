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
{{- if .Values.watchNamespaces }}{{ join "," .Values.watchNamespaces }}{{ else }}{{ .Release.Namespace }}{{ end -}}
{{- end -}}
{{- define "spindle.leaderElection" -}}
{{- $enabled := toString .Values.leaderElection.enabled -}}
{{- if and (eq $enabled "false") (gt (int .Values.replicas) 1) -}}
{{- fail "leaderElection.enabled=false needs replicas: 1 (two operators must never both reconcile)" -}}
{{- end -}}
{{- if or (eq $enabled "true") (and (eq $enabled "auto") (gt (int .Values.replicas) 1)) }}true{{ end -}}
{{- end -}}
{{- define "spindle.leaseName" -}}{{ .Release.Name }}-spindle-operator{{- end -}}
