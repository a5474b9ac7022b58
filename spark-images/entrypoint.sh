#!/bin/bash
# Entrypoint of the Spark image. Spark on Kubernetes starts executor pods with the single
# argument `executor` and describes the executor in SPARK_* environment variables; this turns
# them into the executor JVM's command line. Anything else (`spindle driver ...`) runs as given.
set -euo pipefail

if [ "${1:-}" != "executor" ]; then
  exec "$@"
fi

spark_home="${SPARK_HOME:-$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
java_opts=()
while IFS='=' read -r name _; do
  java_opts+=("${!name}")
done < <(env | grep -o '^SPARK_JAVA_OPT_[0-9]*=' | sort -t_ -k4 -n)

exec "${JAVA_HOME}/bin/java" "${java_opts[@]}" \
  -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
  -cp "${SPARK_CLASSPATH:+${SPARK_CLASSPATH}:}${spark_home}/jars/*" \
  org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
  --driver-url "${SPARK_DRIVER_URL}" \
  --executor-id "${SPARK_EXECUTOR_ID}" \
  --cores "${SPARK_EXECUTOR_CORES}" \
  --app-id "${SPARK_APPLICATION_ID}" \
  --hostname "${SPARK_EXECUTOR_POD_IP}" \
  --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
  --podName "${SPARK_EXECUTOR_POD_NAME}"
