/**
 * The dashboard: figures from GET /admin/v1/stats, and charts of the metric counters:
 * the last hour as the server sampled it (GET /admin/v1/stats/history, one a minute),
 * then a sample every few seconds while the page is open.
 *
 * @module
 */
import { api } from "../api.js";
import { lineChart } from "../chart.js";
import { h, replace } from "../dom.js";
import { failed } from "./shared.js";

/** Samples of /stats taken while the tab lives, for the dashboard's charts. */
const samples = [];
const WINDOW_MS = 3_600_000;
const SAMPLE_MS = 5000;

function toSample(stats) {
  return { ...stats, at: Date.parse(stats.at) };
}

/** The server's history before the first live sample, then the live samples, within the hour. */
function series(history) {
  const first = samples.length ? samples[0].at : Infinity;
  const all = [...history.filter((s) => s.at < first), ...samples];
  const since = all.length ? all[all.length - 1].at - WINDOW_MS : 0;
  return all.filter((s) => s.at >= since);
}

function perMinute(points, key) {
  const rates = [];
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1];
    const b = points[i];
    const minutes = (b.at - a.at) / 60000;
    if (minutes <= 0) continue;
    const delta = Math.max(0, b.counters[key] - a.counters[key]);
    rates.push({ at: b.at, value: delta / minutes });
  }
  return rates;
}

export async function renderDashboard(main, session) {
  const cards = h("div", { class: "cards" });
  const charts = h("div", { class: "charts" });
  replace(
    main,
    h("h1", {}, "Dashboard"),
    cards,
    h("h2", {}, "Activity"),
    h(
      "p",
      { class: "hint" },
      "From this keygate instance's metric counters: the last hour, one sample a minute, " +
        `then every ${SAMPLE_MS / 1000} s while this page is open.`,
    ),
    charts,
  );
  const history = (await api("GET", "/stats/history")).samples.map(toSample);
  async function sample() {
    const stats = await api("GET", "/stats");
    samples.push(toSample(stats));
    while (samples.length && samples[0].at < samples[samples.length - 1].at - WINDOW_MS) {
      samples.shift();
    }
    const points = series(history);
    replace(
      cards,
      [
        ["Users", stats.users],
        ["API keys", stats.api_keys],
        ["Live tokens", stats.live_tokens],
        ["Throttled now", stats.throttled_subjects],
      ].map(([label, value]) =>
        h("div", { class: "card stat" }, h("span", {}, label), h("strong", {}, value))
      ),
    );
    replace(
      charts,
      lineChart("Live tokens", points.map((s) => ({ at: s.at, value: s.live_tokens }))),
      lineChart("Logins per minute", perMinute(points, "tokens_issued"), "/min"),
      lineChart("Failed logins per minute", perMinute(points, "login_failures"), "/min"),
      lineChart(
        "Throttled subjects",
        points.map((s) => ({ at: s.at, value: s.throttled_subjects })),
      ),
    );
  }
  await sample();
  session.every(SAMPLE_MS, () => sample().catch(failed));
}
