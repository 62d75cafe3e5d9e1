"""deploy/prometheus: the rules load, their unit tests pass, and no alert lacks
a test that fires it and one that must not (promtool from the Debian
`prometheus` package)."""
import pathlib
import re
import shutil
import subprocess

import pytest

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None,
                                    reason="promtool not installed (Debian package prometheus)")


def _alerts():
    return re.findall(r"^\s*- alert:\s*(\S+)", (DEPLOY / "alerts.yml").read_text(), re.M)


@needs_promtool
def test_rules_are_valid():
    out = subprocess.run([PROMTOOL, "check", "rules", str(DEPLOY / "alerts.yml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in out.stdout


@needs_promtool
def test_rule_unit_tests_pass():
    out = subprocess.run([PROMTOOL, "test", "rules", "alerts_test.yml"], cwd=DEPLOY,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_alert_has_a_firing_and_a_quiet_test():
    text = (DEPLOY / "alerts_test.yml").read_text()
    # Each alert_rule_test item: its alertname, then either "exp_alerts: []"
    # (must stay quiet) or a list of expected alerts (must fire).
    cases = re.findall(r"alertname:\s*(\S+)\s*\n\s*exp_alerts:\s*(\[\])?", text)
    firing = {name for name, empty in cases if not empty}
    quiet = {name for name, empty in cases if empty}
    alerts = _alerts()
    assert alerts, "no alerts found in alerts.yml"
    assert not set(alerts) - firing, f"alerts without a firing test: {set(alerts) - firing}"
    assert not set(alerts) - quiet, f"alerts without a quiet test: {set(alerts) - quiet}"
    assert not (firing | quiet) - set(alerts), "tests of alerts that do not exist"


def test_every_alert_has_severity_summary_and_description():
    blocks = re.split(r"^\s*- alert:", (DEPLOY / "alerts.yml").read_text(), flags=re.M)[1:]
    for b in blocks:
        name = b.split()[0]
        assert re.search(r"severity:\s*(critical|warning|info)\b", b), name
        assert re.search(r"^\s*summary:", b, re.M), name
        assert re.search(r"^\s*description:", b, re.M), name
