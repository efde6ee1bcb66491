"""A running job's metrics over HTTP, read back with prometheus_client's own
parser and compared with JobClient.metrics()."""
from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request

import numpy as np
import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import fastops as fo

FLINK_NAMES = {"numRecordsIn", "numRecordsOut", "numRecordsInPerSecond", "numRecordsOutPerSecond",
               "busyTimeMsPerSecond", "idleTimeMsPerSecond", "backPressuredTimeMsPerSecond",
               "currentInputWatermark", "numberOfCompletedCheckpoints", "lastCheckpointDuration",
               "lastCheckpointSize", "numRestarts", "uptime"}
ROWS = 100 * 60


def readings():
    for i in range(60):
        yield pa.record_batch({"k": np.arange(100) % 7, "ts": np.full(100, i * 100, dtype=np.int64)})


def slow(batch):
    time.sleep(0.002)
    return batch


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def scrape(url: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(get(url + "/metrics"))}


def test_metrics_are_served_in_prometheus_format_while_the_job_runs(tmp_path):
    env = fo.StreamEnvironment(parallelism=2, executor="threads", checkpoint_dir=str(tmp_path),
                               checkpoint_interval="200ms")
    (env.from_generator(readings, rate=3000, deterministic=True).with_watermark("ts")
     .key_by("k").map(slow, name="slow").sink_to(lambda b: None))
    client = env.execute_async("served", ui=0)
    assert client.ui_url is not None and client.ui_url.startswith("http://127.0.0.1:")
    time.sleep(1.2)
    families = scrape(client.ui_url)
    live = client.metrics()
    assert {f"fastops_{n}" for n in FLINK_NAMES} <= set(families)
    tasks = {t["task"]: t for t in live["tasks"]}
    rows_in = {s.labels["task"]: s.value for s in families["fastops_numRecordsIn"]}
    assert set(rows_in) == set(tasks) and all(s.labels["job_name"] == "served" for s in
                                              families["fastops_numRecordsIn"])
    source = next(t for t in live["tasks"] if t["is_source"])
    assert 0 < rows_in[source["task"]] <= ROWS
    for s in families["fastops_busyTimeMsPerSecond"] + families["fastops_idleTimeMsPerSecond"]:
        assert 0 <= s.value <= 1000
    assert families["fastops_numberOfCompletedCheckpoints"][0].value >= 1
    assert families["fastops_lastCheckpointSize"][0].value > 0
    wm = [s.value for s in families["fastops_currentInputWatermark"]]
    assert wm and all(0 <= w <= 60 * 100 for w in wm)
    assert families["fastops_latency_ms"] and all(s.value >= 0 for s in families["fastops_latency_ms"])
    # the JSON is JobClient.metrics()
    api = json.loads(get(client.ui_url + "/api/metrics"))
    assert set(api) == set(live) and api["job"]["id"] == live["job"]["id"]
    assert [o["name"] for o in api["operators"]] == [o["name"] for o in live["operators"]]
    assert json.loads(get(client.ui_url + "/api/job"))["name"] == "served"
    with pytest.raises(urllib.error.HTTPError, match="404"):
        get(client.ui_url + "/nope")
    client.wait()
    deadline = time.time() + 5
    while time.time() < deadline:  # the server stops with the job
        try:
            get(client.ui_url + "/api/job")
        except (urllib.error.URLError, ConnectionError):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the metrics server still answers after the job ended")


def test_ui_keep_serves_the_final_figures_after_the_end():
    env = fo.StreamEnvironment()
    env.from_generator(readings).sink_to(lambda b: None)
    client = env.execute_async(ui=0, ui_keep=True)
    client.wait()
    time.sleep(0.3)
    final = json.loads(get(client.ui_url + "/api/job"))
    assert final["status"] == "FINISHED" and final["rows_in"] == ROWS


@pytest.mark.parametrize("ui", [-1, 70000, "host:port", 1.5])
def test_a_bad_ui_is_refused_at_the_callers_line(ui):
    env = fo.StreamEnvironment()
    env.from_generator(readings).sink_to(lambda b: None)
    with pytest.raises(ValueError, match="ui must be"):
        env.execute(ui=ui)


def test_every_family_is_exported_once():
    env = fo.StreamEnvironment(parallelism=2, executor="threads")
    env.from_generator(readings, rate=5000).key_by("k").map(slow, name="slow").sink_to(lambda b: None)
    client = env.execute_async(ui=0)
    time.sleep(0.6)
    text = get(client.ui_url + "/metrics")
    client.wait()
    helps = [line.split()[2] for line in text.splitlines() if line.startswith("# HELP")]
    assert len(helps) == len(set(helps))


def browser():
    """Headless Chromium (Debian's chromium and chromium-driver, which .ci/run installs)."""
    if shutil.which("chromium") is None or shutil.which("chromedriver") is None:
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900"):
        opts.add_argument(arg)
    opts.binary_location = shutil.which("chromium")
    return webdriver.Chrome(options=opts, service=webdriver.ChromeService(shutil.which("chromedriver")))


def test_the_page_shows_the_job_graph_and_live_numbers_in_a_real_browser(tmp_path):
    env = fo.StreamEnvironment(parallelism=2, executor="threads", checkpoint_dir=str(tmp_path / "cp"),
                               checkpoint_interval="300ms")
    (env.from_generator(readings, rate=1200, deterministic=True).with_watermark("ts")
     .key_by("k").map(slow, name="slow").sink_to(lambda b: None))
    client = env.execute_async("watched", ui=0)
    driver = browser()
    try:
        driver.get(client.ui_url + "/")
        wait = WebDriverWait(driver, 15)
        names = [o["name"] for o in client.metrics()["operators"]]
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#graph g.node")) == len(names))
        shown = [g.get_attribute("data-operator") for g in driver.find_elements(By.CSS_SELECTOR, "#graph g.node")]
        assert sorted(shown) == sorted(names)
        assert driver.find_element(By.ID, "title").text == "fastops job: watched"
        first = driver.find_element(By.ID, "rows_in").text
        wait.until(lambda d: d.find_element(By.ID, "rows_in").text != first)  # it updates live
        assert int(driver.find_element(By.ID, "rows_in").text.replace(",", "")) <= ROWS
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#rates polyline"))
        driver.save_screenshot(str(tmp_path / "page.png"))
        assert (tmp_path / "page.png").stat().st_size > 10_000
    finally:
        driver.quit()
        client.wait()


def test_late_rows_are_counted_as_the_late_side_output_holds_them():
    def events():
        rng = np.random.default_rng(5)
        for i in range(30):
            ts = i * 1000 + rng.integers(0, 1000, 200)
            ts[:7] -= 5000  # behind the watermark: late
            yield pa.record_batch({"k": rng.integers(0, 5, 200), "ts": ts.astype(np.int64)})

    env = fo.StreamEnvironment(parallelism=2, executor="threads")
    windows = (env.from_generator(events).with_watermark("ts").key_by("k")
               .window(fo.windows.Tumbling(1000)).aggregate(n=fo.agg.count()))
    windows.sink_to(lambda b: None)
    late = windows.side_output("late").sink_to_table("late")
    client = env.execute_async(ui=0, ui_keep=True)
    client.wait()
    time.sleep(0.3)
    assert late.table().num_rows > 0
    assert json.loads(get(client.ui_url + "/api/job"))["late_rows"] == late.table().num_rows
    scraped = sum(s.value for s in scrape(client.ui_url)["fastops_late_rows"])
    assert scraped == late.table().num_rows


def test_shed_rows_and_the_drop_fraction_are_served():
    table = pa.table({"t": np.arange(20_000), "k": np.arange(20_000) % 7, "x": np.ones(20_000)})
    env = fo.StreamEnvironment(qos=fo.QoS(shedding="random", fixed_drop=0.5))
    (env.from_arrow(table, batch_size=1000).with_watermark("t").key_by("k").window(fo.windows.Tumbling(1000))
     .aggregate(n=fo.agg.count()).sink_to(lambda b: None))
    client = env.execute_async(ui=0, ui_keep=True)
    result = client.wait()
    time.sleep(0.3)
    scraped = scrape(client.ui_url)
    assert 0 < result.shedding["rows_shed"] < 20_000
    assert sum(s.value for s in scraped["fastops_rows_shed"]) == result.shedding["rows_shed"]
    assert [s.value for s in scraped["fastops_drop_fraction"]] == [0.5]
    assert [s.value for s in scraped["fastops_rows_offered"]] == [20_000]
    assert json.loads(get(client.ui_url + "/api/metrics"))["shedding"]["mode"] == "random"
