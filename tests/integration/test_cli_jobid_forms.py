"""Every encoding of a job id that `job id --to=` prints is taken back as a JOBID by
the commands that take one, as Flux's parser takes them: dec, hex, dothex, the kvs
form (`job.` + dothex), f58 (and its ASCII f), words and emoji."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)

FORMS = ("dec", "hex", "dothex", "kvs", "f58", "f58plain", "words", "emoji")


def test_every_encoding_names_the_job_everywhere(inst1):
    jobid = inst1.cli("submit", "--urgency=hold", "true", check=True).stdout.strip()
    dec = inst1.cli("job", "id", "--to=dec", jobid, check=True).stdout.strip()
    for form in FORMS:
        text = inst1.cli("job", "id", f"--to={form}", jobid, check=True).stdout.strip()
        assert inst1.cli("job", "id", text, check=True).stdout.strip() == dec, form
        cp = inst1.cli("jobs", "-n", "-o", "{id.dec} {urgency}", text)
        assert (cp.returncode, cp.stdout.split()) == (0, [dec, "0"]), (form, cp.stderr)
        assert inst1.cli("job", "info", text, "jobspec").returncode == 0, form
        assert inst1.cli("job", "eventlog", text, check=True).stdout.count("\n") >= 3
    kvs = inst1.cli("job", "id", "--to=kvs", jobid, check=True).stdout.strip()
    inst1.cli("job", "urgency", kvs, "16", check=True)
    assert inst1.cli("job", "wait", kvs).returncode == 0
    for bad in ("job.", "job.x", "job"):
        cp = inst1.cli("job", "eventlog", bad)
        assert cp.returncode != 0 and "error parsing jobid" in cp.stderr, bad


def test_a_bad_job_id_is_flux_jobs_error(inst1):
    """As outputs.md's capture of `flux job eventlog nosuchjob`: exit 1, the id quoted."""
    for sub in (["eventlog"], ["info"], ["status"], ["hostpids"], ["urgency"]):
        args = ["job", *sub, "nosuchjob"] + (["16"] if sub == ["urgency"] else []) + \
            (["R"] if sub == ["info"] else [])
        cp = inst1.cli(*args)
        assert (cp.returncode, cp.stderr) == \
            (1, f'fluxlite job {sub[0]}: error parsing jobid: "nosuchjob"\n'), args
