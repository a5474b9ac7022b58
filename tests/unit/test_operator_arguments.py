"""`spindle operator`'s arguments, as the chart renders them: values it cannot use stop it at
once with `InvalidArguments` naming the flag (and the chart value), before it reaches the
cluster; it printed "This is a Spindle bug" for a default storage endpoint without a scheme."""

from __future__ import annotations

import pytest

from spindle.cli.main import main


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--default-storage-uri", "s3://b/p", "--default-storage-endpoint", "minio:9000"],
            "--default-storage-endpoint",
        ),
        (
            ["--default-storage-uri", "s3://b/p", "--default-storage-secret", "Bad Name!"],
            "--default-storage-secret: String should match pattern",
        ),
        (["--leader-election", "--lease-namespace", "s", "--retry-period", "0"], "retry"),
        (["--leader-election", "--lease-duration", "10", "--renew-deadline", "12"], "renew"),
    ],
)
def test_values_the_operator_cannot_use_stop_it_with_the_flag_named(
    flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["operator", "--all-namespaces", "--lease-namespace", "s", *flags]) == 1
    err = capsys.readouterr().err
    assert "InvalidArguments" in err and said in err and "Spindle bug" not in err
