import { marked } from "marked";

const md = `# Title

Some *emphasis*, **strong**, \`code\` and a [link](https://example.com "t").

- one
- two
  1. nested
  2. list

> quote

| a | b |
|---|:-:|
| 1 | 2 |

\`\`\`js
const x = 1 < 2;
\`\`\`

~~gone~~ and <span>html</span> & stuff
`;

export function run() {
  return {
    html: marked.parse(md),
    inline: marked.parseInline("a _b_ **c**"),
    lexer: marked.lexer("# h\n\ntext").map((t) => t.type),
  };
}
