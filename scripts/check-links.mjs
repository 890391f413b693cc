// Checks the links of the user docs (README.md and docs/*.md, or the files
// given): every relative link must name a file that exists, and every
// #anchor one of the headings (or <a id>/<a name>) of the Markdown file it
// points into, as GitHub would slug them. Links out of the repository
// (http:, https:, mailto:) are not fetched. Exit 1 with one line per broken
// link; 0 with a count when none is.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Markdown text without fenced code blocks (their lines blanked, so line numbers stay) and inline code. */
export function withoutCode(markdown) {
  let fence;
  return markdown
    .split("\n")
    .map((line) => {
      const opening = line.match(/^\s*(`{3,}|~{3,})/);
      if (fence) {
        if (opening && opening[1][0] === fence[0] && opening[1].length >= fence.length) {
          fence = undefined;
        }
        return "";
      }
      if (opening) {
        fence = opening[1];
        return "";
      }
      return line.replace(/(`+)[\s\S]*?\1/g, (code) => " ".repeat(code.length));
    })
    .join("\n");
}

/** GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces to hyphens. */
export function slugOf(heading) {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // a link's text only
    .replace(/<[^>]+>/g, "") // inline HTML
    .replace(/[`*]/g, "")
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(/ /g, "-");
}

/** The anchors a Markdown file defines: its headings' slugs (repeats get -1, -2, …) and explicit ids. */
export function anchorsOf(markdown) {
  const anchors = new Set();
  const seen = new Map();
  let fence;
  for (const line of markdown.split("\n")) {
    const opening = line.match(/^\s*(`{3,}|~{3,})/);
    if (fence) {
      if (opening && opening[1][0] === fence[0] && opening[1].length >= fence.length) {
        fence = undefined;
      }
      continue;
    }
    if (opening) {
      fence = opening[1];
      continue;
    }
    const heading = line.match(/^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/);
    if (heading) {
      const base = slugOf(heading[1]);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const match of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(match[1]);
  }
  return anchors;
}

/** The link targets of a Markdown file, with their line numbers: inline links, images and reference definitions. */
export function linksOf(markdown) {
  const links = [];
  withoutCode(markdown)
    .split("\n")
    .forEach((line, index) => {
      for (const match of line.matchAll(
        /!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g,
      )) {
        links.push({ target: match[1], line: index + 1 });
      }
      const definition = line.match(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/);
      if (definition) links.push({ target: definition[1], line: index + 1 });
      for (const match of line.matchAll(/<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"/g)) {
        links.push({ target: match[1], line: index + 1 });
      }
    });
  return links;
}

/** Broken links of one file, as "file:line: target: why". */
export function brokenLinksOf(file) {
  const problems = [];
  const text = readFileSync(file, "utf8");
  for (const { target, line } of linksOf(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
    const [pathPart, anchor] = target.split("#", 2);
    const path = decodeURIComponent(pathPart);
    const where = `${relative(process.cwd(), file)}:${line}: ${target}`;
    const targetFile = path === "" ? file : resolve(dirname(file), path);
    if (path !== "" && !existsSync(targetFile)) {
      problems.push(`${where}: no such file ${relative(process.cwd(), targetFile)}`);
      continue;
    }
    if (anchor === undefined || anchor === "") continue;
    if (statSync(targetFile).isDirectory() || !targetFile.endsWith(".md")) continue;
    if (!anchorsOf(readFileSync(targetFile, "utf8")).has(anchor)) {
      problems.push(`${where}: no heading #${anchor} in ${relative(process.cwd(), targetFile)}`);
    }
  }
  return problems;
}

/** The files checked by default: README.md and every Markdown file in docs/. */
export function defaultFiles(root) {
  const docs = join(root, "docs");
  return [
    join(root, "README.md"),
    ...readdirSync(docs)
      .filter((name) => name.endsWith(".md"))
      .sort()
      .map((name) => join(docs, name)),
  ];
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  const files =
    process.argv.length > 2 ? process.argv.slice(2).map((f) => resolve(f)) : defaultFiles(root);
  const problems = files.flatMap((file) => brokenLinksOf(file));
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`${problems.length} broken link(s) in ${files.length} file(s)`);
    process.exit(1);
  }
  const count = files.reduce((sum, file) => sum + linksOf(readFileSync(file, "utf8")).length, 0);
  console.log(`docs:check: ${count} links in ${files.length} files, none broken`);
}
