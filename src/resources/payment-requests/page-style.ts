/**
 * The hosted payment page's one stylesheet, served at `/pay/assets/page.css`. A TS constant rather than a
 * loose .css file because the service runs from compiled output (dist/), which holds only compiled modules
 * and the migrations. The page's CSP allows styles from 'self' only, so no style may be inline.
 *
 * Colours meet WCAG AA contrast, 4.5:1 for text (#1f2933 on #ffffff 14.8:1, #52606d on #ffffff 6.5:1 and on
 * #f1f4f8 5.9:1, #ffffff on #1d4ed8 6.7:1, #7c2d12 on #fff7ed 8.8:1, #991b1b on #fef2f2 7.6:1, #14532d on
 * #f0fdf4 8.7:1) and 3:1 for a control's edge (#7b8794 on #ffffff 3.7:1). A client's accent colour
 * (accentStyle) is held to 4.5:1 against white by the operator API (src/domain/branding.ts).
 *
 * On a phone (under 30rem) each value of the summary sits under its label, left-aligned: right-aligned text that
 * wraps reads badly in a narrow column.
 */
export const PAGE_STYLE = `*,
*::before,
*::after {
  box-sizing: border-box;
}
html {
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  font-size: 100%;
  line-height: 1.5;
  color: #1f2933;
  background: #f1f4f8;
}
body {
  margin: 0;
  padding: 2rem 1rem;
}
main {
  max-width: 32rem;
  margin: 0 auto;
  padding: 2rem 1.75rem;
  background: #ffffff;
  border: 1px solid #d9e2ec;
  border-radius: 0.75rem;
  box-shadow: 0 1px 3px rgba(15, 23, 42, 0.08);
}
.creditor {
  margin: 0 0 0.25rem;
  color: #52606d;
  font-size: 0.95rem;
}
.creditor strong {
  color: #1f2933;
}
h1 {
  margin: 0 0 1.25rem;
  font-size: 1.6rem;
  line-height: 1.25;
}
h2 {
  margin: 1.5rem 0 0.5rem;
  font-size: 1.1rem;
}
p {
  margin: 0 0 1rem;
}
main > :last-child {
  margin-bottom: 0;
}
.summary {
  margin: 0 0 1.5rem;
  padding: 0;
  border-top: 1px solid #d9e2ec;
}
.summary div {
  display: grid;
  grid-template-columns: minmax(5rem, max-content) minmax(0, 1fr);
  align-items: baseline;
  gap: 0.25rem 1rem;
  padding: 0.75rem 0;
  border-bottom: 1px solid #d9e2ec;
}
.summary dt {
  color: #52606d;
}
.summary dd {
  margin: 0;
  font-weight: 600;
  text-align: right;
  overflow-wrap: anywhere;
}
.summary .amount {
  font-size: 1.35rem;
  font-variant-numeric: tabular-nums;
}
form {
  display: grid;
  gap: 0.75rem;
  margin: 0 0 1.25rem;
}
button {
  display: block;
  width: 100%;
  min-height: 2.75rem;
  padding: 0.7rem 1rem;
  font: inherit;
  font-weight: 600;
  border-radius: 0.5rem;
  cursor: pointer;
}
button.pay {
  color: #ffffff;
  background: #1d4ed8;
  border: 1px solid #1d4ed8;
}
button.pay:hover {
  background: #1e40af;
  border-color: #1e40af;
}
button.fail {
  color: #1f2933;
  background: #ffffff;
  border: 1px solid #7b8794;
}
button.fail:hover {
  background: #f1f4f8;
}
button:focus-visible,
a:focus-visible {
  outline: 3px solid #f59e0b;
  outline-offset: 2px;
}
a {
  color: #1d4ed8;
}
.notice {
  margin: 0 0 1.25rem;
  padding: 0.75rem 1rem;
  border-radius: 0.5rem;
  border-left: 4px solid currentColor;
}
.notice p:last-child {
  margin-bottom: 0;
}
.notice-sandbox {
  color: #7c2d12;
  background: #fff7ed;
}
.notice-error {
  color: #991b1b;
  background: #fef2f2;
}
.notice-success {
  color: #14532d;
  background: #f0fdf4;
}
.notice-info {
  color: #1f2933;
  background: #f1f4f8;
}
.contact {
  margin: 1.5rem 0 0;
  padding: 1rem 0 0;
  border-top: 1px solid #d9e2ec;
}
.summary + .contact {
  padding-top: 0;
  border-top: 0;
}
.contact h2 {
  margin: 0 0 0.25rem;
  font-size: 1rem;
}
.contact p {
  margin: 0 0 0.5rem;
}
.contact ul {
  margin: 0;
  padding: 0;
  list-style: none;
}
.contact li {
  display: flex;
  gap: 0.75rem;
  padding: 0.2rem 0;
}
.contact .label {
  flex: 0 0 3.5rem;
  color: #52606d;
}
.contact a {
  min-width: 0;
  overflow-wrap: anywhere;
}
.fine-print {
  margin: 1.5rem 0 0;
  color: #52606d;
  font-size: 0.875rem;
}
@media (max-width: 30rem) {
  body {
    padding: 0;
  }
  main {
    border: 0;
    border-radius: 0;
    box-shadow: none;
    min-height: 100vh;
    padding: 1.5rem 1.25rem;
  }
  /* A phone: each value under its label, read from the left, wrapping as a paragraph does. */
  .summary div {
    display: block;
  }
  .summary dd {
    margin-top: 0.125rem;
    text-align: left;
  }
}
`

/** The accent's darker shade for a hovered button: 15% towards black, so its contrast with white only rises. */
function darker(hex: string): string {
  const channel = (i: number) =>
    Math.round(Number.parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16) * 0.85)
      .toString(16)
      .padStart(2, '0')
  return `#${channel(0)}${channel(1)}${channel(2)}`
}

/**
 * The stylesheet of a client's accent colour (`#rrggbb`, lower case, checked by the operator API for 4.5:1
 * against white), served at `/pay/assets/accent/<rrggbb>.css` after page.css: the Pay button and links. By
 * colour, not by client, so it names no one and browsers may keep it.
 */
export function accentStyle(hex: string): string {
  const hover = darker(hex)
  return `button.pay {
  background: ${hex};
  border-color: ${hex};
}
button.pay:hover {
  background: ${hover};
  border-color: ${hover};
}
a {
  color: ${hex};
}
`
}
