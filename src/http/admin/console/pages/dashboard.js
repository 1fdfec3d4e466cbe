/**
 * The dashboard: figures from GET /admin/v1/stats, and charts of the metric counters
 * sampled while the page is open.
 *
 * @module
 */
import { api } from "../api.js";
import { lineChart } from "../chart.js";
import { h, replace } from "../dom.js";
import { failed } from "./shared.js";

/** Samples of /stats kept while the tab lives, for the dashboard's charts. */
const samples = [];
const MAX_SAMPLES = 180;
const SAMPLE_MS = 5000;
function perMinute(key) {
  const points = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1];
    const b = samples[i];
    const minutes = (b.at - a.at) / 60000;
    if (minutes <= 0) continue;
    const delta = Math.max(0, b.counters[key] - a.counters[key]);
    points.push({ at: b.at, value: delta / minutes });
  }
  return points;
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
      `From keygate's metric counters, sampled every ${
        SAMPLE_MS / 1000
      } s while this page is open.`,
    ),
    charts,
  );
  async function sample() {
    const stats = await api("GET", "/stats");
    samples.push({ ...stats, at: Date.parse(stats.at) });
    if (samples.length > MAX_SAMPLES) samples.shift();
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
      lineChart("Live tokens", samples.map((s) => ({ at: s.at, value: s.live_tokens }))),
      lineChart("Logins per minute", perMinute("tokens_issued"), "/min"),
      lineChart("Failed logins per minute", perMinute("login_failures"), "/min"),
      lineChart(
        "Throttled subjects",
        samples.map((s) => ({ at: s.at, value: s.throttled_subjects })),
      ),
    );
  }
  await sample();
  session.every(SAMPLE_MS, () => sample().catch(failed));
}
