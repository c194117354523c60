{{/* Chart name, overridable. */}}
{{- define "tftui.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "tftui.fullname" -}}
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

{{- define "tftui.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the daemon's pods: stable across upgrades. */}}
{{- define "tftui.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tftui.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: daemon
{{- end }}

{{- define "tftui.labels" -}}
helm.sh/chart: {{ include "tftui.chart" . }}
{{ include "tftui.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "tftui.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tftui.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tftui.leaseName" -}}
{{- default (include "tftui.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/* The Secret holding the metrics DSN ("" for none): the chart's own when metricsDsn.value is set. */}}
{{- define "tftui.dsnSecretName" -}}
{{- if .Values.metricsDsn.value }}
{{- printf "%s-metrics-dsn" (include "tftui.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- .Values.metricsDsn.existingSecret }}
{{- end }}
{{- end }}

{{/* Pod annotations: a checksum of the chart-managed DSN (a new DSN rolls the pods), the
prometheus.io/* scrape hints, then podAnnotations. Empty when there are none. */}}
{{- define "tftui.podAnnotations" -}}
{{- if .Values.metricsDsn.value }}
checksum/metrics-dsn: {{ .Values.metricsDsn.value | sha256sum }}
{{- end }}
{{- if .Values.prometheusScrape }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.containerPort | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Refuse value combinations that would deploy a daemon that can never become ready. */}}
{{- define "tftui.validate" -}}
{{- if and (not (include "tftui.dsnSecretName" .)) (not .Values.metricsOptional) }}
{{- fail "tftui: no metrics DSN: set metricsDsn.existingSecret (a Secret with the DSN) or metricsDsn.value, or metricsOptional=true" }}
{{- end }}
{{- if and (not .Values.externalScaler.enabled) (or .Values.externalScaler.secretNamespaces .Values.externalScaler.secretNames) }}
{{- fail "tftui: externalScaler.secretNamespaces/secretNames grant Secret access only the external scaler uses: set externalScaler.enabled=true or leave them empty" }}
{{- end }}
{{- end }}
