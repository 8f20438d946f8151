"""The project's App mended (issue 41): ``python -m aoi_fl.flower check|run`` refuses a bad run
config in seconds with exit status 2 and reports a failed run with 1; a sampler named on the
command line leaves out the shipped options it does not take (and says what to set), the
ServerApp and the nodes resolving the same configuration; FedSUM's K is given once; the
outputs go to an ignored folder."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from aoi_fl.flower import app, cli  # noqa: E402
from aoi_fl.pipeline import runs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def fused(*run_config):
    return cli.checked(app.APP_DIR, run_config, None)


def test_a_sampler_named_on_the_command_line_leaves_out_the_shipped_options_it_does_not_take():
    parsed, overrides = fused('sampler.name="probabilistic" sampler.m=4')
    # markov_optimal's m_prime fits probabilistic too: kept; the table's seed kept
    assert parsed.config["sampler"] == {"name": "probabilistic", "m": 4, "m_prime": 2, "seed": 0}
    assert overrides["sampler.name"] == "probabilistic"


def test_a_sampler_that_needs_an_option_the_app_lacks_says_what_to_set():
    with pytest.raises(ValueError) as err:
        fused('sampler.name="power_of_choice"')
    text = str(err.value)
    assert "sampler 'power_of_choice': missing options ['d']" in text
    assert "left out (sampler.m_prime)" in text and "config-file" in text


def test_the_nodes_resolve_what_the_serverapp_resolved(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_config = {**pyproject(), "sampler.name": "random"}  # as Flower fuses an override
    server = app.parse_run_config(run_config, overrides={"sampler.name"})
    node = app.parse_run_config(run_config, node=True)
    assert server.config == node.config
    assert "m_prime" in server.config["sampler"] and server.config["sampler"]["name"] == "random"


def pyproject():
    import tomllib

    from flwr.common.config import flatten_dict

    with (app.APP_DIR / "pyproject.toml").open("rb") as f:
        return flatten_dict(tomllib.load(f)["tool"]["flwr"]["app"]["config"])


def test_a_shipped_option_no_sampler_takes_is_still_refused_without_a_rename():
    with pytest.raises(ValueError, match=r"unknown options \['m_primee'\]"):
        app.parse_run_config({**pyproject(), "sampler.m_primee": 2})


def test_fedsums_local_steps_come_from_the_training_section_once():
    parsed, _ = fused('training.algorithm.name="fedsum"')
    algorithm = parsed.config["training"]["algorithm"]
    assert algorithm == {"name": "fedsum", "local_steps": parsed.config["training"]["local_steps"]}
    # a run config that names FedSUM's K itself keeps it (and the configuration checks agree)
    with pytest.raises(ValueError, match="local_steps"):
        runs.build_trainer(
            {**parsed.config, "training": {**parsed.config["training"], "local_steps": 3}}
        )


def test_a_fresh_server_process_fills_fedsums_local_steps_from_the_apps_table():
    # the ServerApp imports only aoi_fl.flower.app: nothing else has loaded the papers there, and
    # an app table naming FedSUM (no command-line rename) must still get its K
    code = (
        "import tomllib\n"
        "from flwr.common.config import flatten_dict\n"
        "from aoi_fl.flower import app\n"
        "with (app.APP_DIR / 'pyproject.toml').open('rb') as f:\n"
        "    table = flatten_dict(tomllib.load(f)['tool']['flwr']['app']['config'])\n"
        "table.update({'training.algorithm.name': 'fedsum', 'training.local_steps': 3})\n"
        "print(app.parse_run_config(table).config['training']['algorithm'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{'name': 'fedsum', 'local_steps': 3}"


def test_the_outputs_go_to_an_ignored_folder_as_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parsed, overrides = fused()
    assert parsed.output == tmp_path / "flower-runs" / "history.json"
    assert overrides["output"] == str(tmp_path / "flower-runs" / "history.json")
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "flower-runs/history.json"], cwd=ROOT, check=False
    )
    assert ignored.returncode == 0


@pytest.mark.parametrize(
    ("argv", "code", "said"),
    [
        (["check"], 0, "checked: markov_optimal on mnist"),
        (["check", "--run-config", 'sampler.nme="x"'], 2, "Key 'sampler.nme' is not present"),
        (["check", "--run-config", "training.batch_size=0"], 2, "batch_size"),
        (["check", "--num-supernodes", "4"], 2, "num-supernodes=4"),
    ],
)
def test_check_answers_in_seconds_with_an_exit_status(argv, code, said, capsys):
    assert cli.main(argv) == code
    out = capsys.readouterr()
    assert said in out.out + out.err


def test_run_exits_1_when_the_run_did_not_complete(monkeypatch, capsys):
    def failed(*args, **kwargs):
        raise RuntimeError("the Flower run ended finished:failed: crashed")

    monkeypatch.setattr(cli, "flwr_run", failed)
    assert cli.main(["run"]) == 1
    assert "finished:failed" in capsys.readouterr().err
