{{/* The chart's name (nameOverride wins). */}}
{{- define "llmbench-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Objects' name: fullnameOverride, else the release name when it already contains the
chart's name (release "llmbench-operator" -> "llmbench-operator"), else release-chart. */}}
{{- define "llmbench-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "llmbench-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llmbench-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "llmbench-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "llmbench-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "llmbench-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "llmbench-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator's image; the tag defaults to the chart's appVersion. */}}
{{- define "llmbench-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The runner Jobs' image (--runner-image): runner.image, else the operator's image (one
image has both entrypoints). */}}
{{- define "llmbench-operator.runnerImage" -}}
{{- default (include "llmbench-operator.image" .) .Values.runner.image }}
{{- end }}

{{/* Cluster-scoped names carry the release namespace in a namespaced install, so two
namespaced installs do not collide; an all-namespaces install keeps the plain name (a second
all-namespaces operator would fight over every benchmark: helm refuses it). */}}
{{- define "llmbench-operator.clusterRoleName" -}}
{{- if .Values.watchNamespaces }}
{{- printf "%s-%s" (include "llmbench-operator.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- include "llmbench-operator.fullname" . }}
{{- end }}
{{- end }}

{{/* The runner pods' defaults as JSON (--runner-pod-defaults): runner.* values, empty ones left out. */}}
{{- define "llmbench-operator.runnerPod" -}}
{{- $r := .Values.runner -}}
{{- $pod := dict -}}
{{- with $r.imagePullSecrets }}{{ $_ := set $pod "imagePullSecrets" . }}{{ end -}}
{{- with $r.podLabels }}{{ $_ := set $pod "podLabels" . }}{{ end -}}
{{- with $r.podAnnotations }}{{ $_ := set $pod "podAnnotations" . }}{{ end -}}
{{- with $r.priorityClassName }}{{ $_ := set $pod "priorityClassName" . }}{{ end -}}
{{- with $r.nodeSelector }}{{ $_ := set $pod "nodeSelector" . }}{{ end -}}
{{- toJson $pod -}}
{{- end -}}
