"""`radium run` argument handling: ours first, docker's untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from radium.dockerrun import SPLIT_TARGET, docker_argv, parse
from radium.errors import UsageError


def test_radium_options_then_docker_arguments_untouched() -> None:
    request = parse(
        ["--gpus", "2", "--remote", "torch", "--remote=numpy.linalg", "-v", "--",
         "--rm", "-e", "A=1", "--gpus", "all", "img:tag", "python3", "app.py", "--memory", "5"]
    )  # fmt: skip
    assert request.env == {"RADIUM_GPUS": "2"}
    assert request.remote == ["torch", "numpy.linalg"]
    assert request.verbose
    assert request.docker_args == [
        "--rm", "-e", "A=1", "--gpus", "all", "img:tag", "python3", "app.py", "--memory", "5"
    ]  # fmt: skip
    argv = docker_argv(request, "/tmp/cid")
    assert argv[:5] == ["docker", "run", "--runtime=radium", "--cidfile", "/tmp/cid"]
    assert argv[5:11] == ["-e", "RADIUM_GPUS=2", "-e", "RADIUM_IMAGE=img:tag",
                          "-e", "RADIUM_REMOTE=torch,numpy.linalg"]  # fmt: skip
    assert argv[11:] == request.docker_args


def test_a_fraction_alone_asks_no_whole_gpu_and_split_files_are_mounted(tmp_path: Path) -> None:
    split = tmp_path / "split.toml"
    split.write_text('modules = ["torch"]\n')
    request = parse(["--fraction", "0.5", "--split", str(split), "img"])
    assert request.env == {"RADIUM_FRACTION": "0.5"}
    argv = docker_argv(request, "c")
    assert f"{split}:{SPLIT_TARGET}:ro" in argv
    assert f"RADIUM_SPLIT={SPLIT_TARGET}" in argv


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpus", "two", "img"], "--gpus must be a whole number"),
        (["--fraction", "1.5", "img"], "--fraction must be a GPU fraction"),
        (["--fraction", "0.5", "--memory", "100", "img"], "exclude each other"),
        (["--gpus"], "--gpus needs a value"),
        (["--gpus", "1"], "an image is missing"),
    ],
)
def test_bad_requests_are_one_line_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse(argv)


def test_missing_split_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        docker_argv(parse(["--split", str(tmp_path / "none.toml"), "img"]), "c")


@pytest.mark.parametrize(
    ("docker_args", "image"),
    [
        (["--rm", "-e", "A=1", "-it", "img:1", "python3"], "img:1"),
        (["-v", "/a:/b", "--network=none", "--name", "x", "reg:5000/i:t", "sh"], "reg:5000/i:t"),
        (["-eA=1", "-dit", "--init", "-w", "/w", "img"], "img"),
        (["--rm", "--", "img", "-e"], "img"),
        (["--rm", "-e"], None),
    ],
)
def test_the_image_is_found_among_docker_options(docker_args: list[str], image: str | None) -> None:
    from radium.dockerrun import image_of

    assert image_of(docker_args) == image


def test_the_image_and_worker_mode_reach_the_container() -> None:
    argv = docker_argv(parse(["--worker", "container", "--", "--rm", "reg/img:1", "true"]), "c")
    assert "RADIUM_WORKER=container" in argv
    assert "RADIUM_IMAGE=reg/img:1" in argv
    with pytest.raises(UsageError, match='--worker must be "process" or "container"'):
        parse(["--worker", "gpu", "img"])


def test_a_value_equal_to_the_images_is_sent_so_that_it_still_asks() -> None:
    """The runtime reads a value equal to the image's ENV as the image's: radium run makes its
    own differ by a space, which the runtime strips (shim.request.checked)."""
    from radium.shim.request import ImageSet, from_spec

    image = {"RADIUM_GPUS": "2", "RADIUM_PRIORITY": "inference", "PATH": "/bin"}
    argv = docker_argv(parse(["--gpus", "2", "--priority", "batch", "img"]), "c", image)
    env = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-e"]
    assert "RADIUM_GPUS= 2" in env and "RADIUM_PRIORITY=batch" in env
    spec = {"process": {"env": [*(f"{k}={v}" for k, v in image.items()), *env]}}
    request = from_spec(spec, ImageSet("docker", image, {}))
    assert request is not None
    assert (request["radium.io/gpus"], request["radium.io/priority"]) == ("2", "batch")
