{{/* The chart's name, or nameOverride. */}}
{{- define "clusterset-dns.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name when it holds the chart's name, else both. */}}
{{- define "clusterset-dns.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "clusterset-dns.selectorLabels" -}}
app.kubernetes.io/name: {{ include "clusterset-dns.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{- define "clusterset-dns.labels" -}}
{{ include "clusterset-dns.selectorLabels" . }}
app.kubernetes.io/part-of: clusterset-dns
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: "{{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}"
{{- end -}}

{{- define "clusterset-dns.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "clusterset-dns.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The server's flags, from the values; each optional one only when set. */}}
{{- define "clusterset-dns.args" -}}
- --listen=0.0.0.0:1053
- --admin-listen=0.0.0.0:9153
- --zone={{ join "," .Values.zones }}
{{- with .Values.ttl }}
- --ttl={{ . }}
{{- end }}
{{- with .Values.nsAddresses }}
- --ns-address={{ join "," . }}
{{- end }}
- --log-format={{ .Values.logFormat }}
{{- with .Values.logLevel }}
- --log-level={{ . }}
{{- end }}
{{- if .Values.logQueries }}
- --log-queries
{{- end }}
{{- with .Values.clusterId }}
- --cluster-id={{ . }}
{{- end }}
- --lameduck={{ .Values.lameduck }}
- --shutdown-grace={{ .Values.shutdownGrace }}
{{- with .Values.source.kubernetes }}
{{- with .namespaces }}
- --namespace={{ join "," . }}
{{- end }}
{{- with .serviceImportVersion }}
- --serviceimport-version={{ . }}
{{- end }}
{{- if kindIs "slice" .excludeNamespaces }}
- --exclude-namespace={{ join "," .excludeNamespaces }}
{{- end }}
{{- end }}
{{- with .Values.hardening }}
{{- with .denyCidrs }}
- --deny-cidr={{ join "," . }}
{{- end }}
{{- with .allowCidrs }}
- --allow-cidr={{ join "," . }}
{{- end }}
{{- if not (kindIs "invalid" .maxEndpointsPerService) }}
- --max-endpoints-per-service={{ .maxEndpointsPerService }}
{{- end }}
{{- if not (kindIs "invalid" .maxZoneNames) }}
- --max-zone-names={{ .maxZoneNames }}
{{- end }}
{{- if not (kindIs "invalid" .tcpMaxConnections) }}
- --tcp-max-connections={{ .tcpMaxConnections }}
{{- end }}
{{- with .tcpIdleTimeout }}
- --tcp-idle-timeout={{ . }}
{{- end }}
{{- with .allowTransfer }}
- --allow-transfer={{ join "," . }}
{{- end }}
{{- end }}
{{- if .Values.xdp.enabled }}
- --xdp={{ .Values.xdp.interface }}
{{- with .Values.xdp.coalesce }}
- --xdp-coalesce={{ . }}
{{- end }}
{{- end }}
{{- with .Values.source }}
{{- if ne (join "," .read) "mcs" }}
- --source={{ join "," .read }}
{{- end }}
{{- range $link, $id := .linkerd.clusterIds }}
- --linkerd-cluster-id={{ $link }}={{ $id }}
{{- end }}
{{- if .linkerd.mirrors }}
- --linkerd-mirrors
{{- end }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}
