/**
 * Small line charts as SVG, built with DOM calls (no library, nothing
 * inline for the Content-Security-Policy to refuse).
 *
 * @module
 */

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 300;
const HEIGHT = 80;
const PAD = 4;

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  return el;
}

/**
 * A chart of `points` (`{at, value}`, oldest first) with a title, the
 * latest value, and a text alternative for screen readers.
 */
export function lineChart(title, points, unit = "") {
  const figure = document.createElement("figure");
  figure.className = "chart";
  const caption = document.createElement("figcaption");
  const latest = points.length === 0 ? "—" : format(points[points.length - 1].value);
  const strong = document.createElement("strong");
  strong.textContent = `${latest}${unit && points.length ? ` ${unit}` : ""}`;
  caption.append(`${title} `, strong);
  const values = points.map((p) => p.value);
  const max = Math.max(1, ...values);
  const image = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": points.length < 2
      ? `${title}: collecting samples`
      : `${title}: from ${format(values[0])} to ${latest}, highest ${format(Math.max(...values))}`,
  });
  image.append(
    svg("line", { x1: 0, y1: HEIGHT - PAD, x2: WIDTH, y2: HEIGHT - PAD, class: "axis" }),
  );
  if (points.length >= 2) {
    const first = points[0].at;
    const span = Math.max(1, points[points.length - 1].at - first);
    const coords = points.map((p) => [
      ((p.at - first) / span) * WIDTH,
      HEIGHT - PAD - (p.value / max) * (HEIGHT - 2 * PAD),
    ]);
    const line = coords.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
    image.append(
      svg("polygon", {
        points: `0,${HEIGHT - PAD} ${line} ${WIDTH},${HEIGHT - PAD}`,
        class: "area",
      }),
      svg("polyline", { points: line, class: "line" }),
    );
  } else {
    const text = svg("text", {
      x: WIDTH / 2,
      y: HEIGHT / 2,
      "text-anchor": "middle",
      class: "empty",
    });
    text.textContent = "collecting samples…";
    image.append(text);
  }
  const scale = document.createElement("small");
  scale.textContent = `max ${format(max)}`;
  figure.append(caption, image, scale);
  return figure;
}

function format(value) {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}
