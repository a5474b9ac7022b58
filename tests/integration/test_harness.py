"""Each real part of the harness, proven real by what only the real thing does."""

from __future__ import annotations

import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.harness.spindle.dev"},
    "spec": {
        "group": "harness.spindle.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {"size": {"type": "integer", "minimum": 1}},
                            }
                        },
                    }
                },
            }
        ],
    },
}


def wait_for(condition: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(what)


def test_crd_with_structural_schema_rejects_invalid_object(kube: Any) -> None:
    ext = client.ApiextensionsV1Api(kube.api)
    try:
        ext.create_custom_resource_definition(CRD)
    except ApiException as error:
        assert error.status == 409
    custom = client.CustomObjectsApi(kube.api)
    namespace = kube.namespace("crd")

    def established() -> bool:
        crd = ext.read_custom_resource_definition("widgets.harness.spindle.dev")
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        )

    wait_for(established, what="CRD established")
    body = {"apiVersion": "harness.spindle.dev/v1", "kind": "Widget", "metadata": {"name": "w"}}
    with pytest.raises(ApiException) as rejected:
        custom.create_namespaced_custom_object(
            "harness.spindle.dev", "v1", namespace, "widgets", {**body, "spec": {"size": 0}}
        )
    assert rejected.value.status == 422
    created = custom.create_namespaced_custom_object(
        "harness.spindle.dev", "v1", namespace, "widgets", {**body, "spec": {"size": 3}}
    )
    assert created["spec"]["size"] == 3


def test_watch_sees_an_update(kube: Any) -> None:
    core = client.CoreV1Api(kube.api)
    namespace = kube.namespace("watch")
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c"), data={"v": "1"})
    )
    seen: list[str] = []

    def watch_updates() -> None:
        for event in watch.Watch().stream(
            core.list_namespaced_config_map, namespace, timeout_seconds=20
        ):
            if event["type"] == "MODIFIED":
                seen.append(event["object"].data["v"])
                return

    watcher = threading.Thread(target=watch_updates)
    watcher.start()
    time.sleep(0.5)
    core.patch_namespaced_config_map("c", namespace, {"data": {"v": "2"}})
    watcher.join(25)
    assert seen == ["2"]


def test_service_account_without_rights_gets_403(kube: Any, tmp_path: Path) -> None:
    core = client.CoreV1Api(kube.api)
    namespace = kube.namespace("rbac")
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody"))
    )
    token = core.create_namespaced_service_account_token(
        "nobody", namespace, client.AuthenticationV1TokenRequest(spec={"audiences": []})
    ).status.token
    admin = config.new_client_from_config(str(kube.kubeconfig))
    configuration = client.Configuration()
    configuration.host = admin.configuration.host
    configuration.ssl_ca_cert = admin.configuration.ssl_ca_cert
    configuration.verify_ssl = admin.configuration.verify_ssl
    configuration.api_key = {"authorization": f"Bearer {token}"}
    limited = client.CoreV1Api(client.ApiClient(configuration))
    with pytest.raises(ApiException) as denied:
        limited.list_namespaced_secret(namespace)
    assert denied.value.status == 403


def test_s3_conditional_writes_behave_like_aws(s3: Any) -> None:
    s3client, bucket = s3.client(), s3.bucket()
    first = s3client.put_object(Bucket=bucket, Key="latest", Body=b"one", IfNoneMatch="*")
    with pytest.raises(ClientError) as exists:
        s3client.put_object(Bucket=bucket, Key="latest", Body=b"two", IfNoneMatch="*")
    assert exists.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    second = s3client.put_object(Bucket=bucket, Key="latest", Body=b"three", IfMatch=first["ETag"])
    with pytest.raises(ClientError) as stale:
        s3client.put_object(Bucket=bucket, Key="latest", Body=b"four", IfMatch=first["ETag"])
    assert stale.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3client.get_object(Bucket=bucket, Key="latest")["Body"].read() == b"three"
    assert second["ETag"] != first["ETag"]


def test_s3_concurrent_create_only_race_has_exactly_one_winner(s3: Any) -> None:
    bucket = s3.bucket()

    def attempt(i: int) -> bool:
        try:
            s3.client().put_object(Bucket=bucket, Key="race", Body=str(i).encode(), IfNoneMatch="*")
        except ClientError as error:
            assert error.response["ResponseMetadata"]["HTTPStatusCode"] in (409, 412)
            return False
        return True

    for round_ in range(5):
        key_bucket = bucket
        s3.client().delete_object(Bucket=key_bucket, Key="race")
        with ThreadPoolExecutor(8) as pool:
            wins = list(pool.map(attempt, range(8)))
        assert sum(wins) == 1, f"round {round_}: {wins}"
        body = s3.client().get_object(Bucket=bucket, Key="race")["Body"].read()
        assert wins[int(body)]


def test_spark_reads_and_writes_s3a_and_delta(spark: Any, s3: Any) -> None:
    bucket = s3.bucket("spark")
    frame = spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string")
    frame.write.mode("overwrite").parquet(f"s3a://{bucket}/plain")
    assert spark.read.parquet(f"s3a://{bucket}/plain").count() == 2
    frame.write.format("delta").save(f"s3a://{bucket}/delta")
    spark.createDataFrame([(3, "c")], "id long, v string").write.format("delta").mode(
        "append"
    ).save(f"s3a://{bucket}/delta")
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, f"s3a://{bucket}/delta")
    assert table.toDF().count() == 3
    assert table.history().select("version").orderBy("version").collect()[-1][0] == 1
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(k.startswith("delta/_delta_log/") for k in keys)


def test_helm_version_runs(helm: Path) -> None:
    output = subprocess.run([str(helm), "version"], capture_output=True, text=True, check=True)
    assert "v3.19.5" in output.stdout
