//! The pipeline description language (`.ion` files).
//!
//! One task per line, in the paper's form
//!
//! ```text
//! command argument ... <input_queue ... >output_queue ...
//! ```
//!
//! - arguments are `value` (positional, filling the task's arguments in order) or
//!   `key=value`; a value with spaces is written in double quotes;
//! - a queue is `name`, or `name:free_list(count,size)` to attach a free list (pool) of
//!   `count` buffers of `size` bytes (`size` may end in `k`, `M`, `KiB`...), or
//!   `name:free_list` to attach one declared elsewhere; the declaration may also set the
//!   bytes each buffer keeps free before and after its data, `(count,size,headroom=128,
//!   tailroom=16)`, for headers and trailers added without a copy (the paper's §3.4);
//! - a queue may name hooks in brackets after it, `name[put=HOOK]`, `name[get=HOOK]` or both
//!   (`name:free_list(4,64k)[put=log,get=status]`): a put hook runs when a buffer lands on
//!   the empty queue (the paper's "kick" of an idle device), a get hook before a dequeue from
//!   the empty queue, and what it returns is dequeued (the paper's "status queue"; a queue
//!   with a get hook needs no writer). Hooks are looked up by name in the registry
//!   ([`Registry::register_put_hook`](crate::Registry::register_put_hook));
//! - a line starting with `<` or `>` continues the task above it;
//! - `#` starts a comment; `priority=interrupt|normal|background` sets a task's class;
//! - `@NAME` places the task on engine `NAME` (`offhost submit --engine NAME=URL`); one
//!   engine runs it all where the file is run whole (`offhost run`, one daemon).

use crate::error::PipelineError;

/// A parsed (not yet checked) pipeline description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Task lines in order.
    pub tasks: Vec<TaskLine>,
}

/// One task line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLine {
    /// Command name.
    pub command: String,
    /// Line of the command.
    pub line: usize,
    /// Column of the command.
    pub col: usize,
    /// Arguments in order.
    pub args: Vec<ArgTok>,
    /// Input queues.
    pub inputs: Vec<QueueRef>,
    /// Output queues.
    pub outputs: Vec<QueueRef>,
    /// The engine the task is placed on (`@NAME`), if written.
    pub engine: Option<Placement>,
}

/// Where a task line places its task: `@NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Engine name.
    pub name: String,
    /// Line.
    pub line: usize,
    /// Column of the `@`.
    pub col: usize,
}

/// One argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgTok {
    /// `key` of `key=value`, or `None` when positional.
    pub key: Option<String>,
    /// The value.
    pub value: String,
    /// Line.
    pub line: usize,
    /// Column.
    pub col: usize,
}

/// A queue mentioned by a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRef {
    /// Queue name.
    pub name: String,
    /// Line.
    pub line: usize,
    /// Column.
    pub col: usize,
    /// Free list attached, if written.
    pub pool: Option<PoolRef>,
    /// Hooks written in brackets after it (`[put=NAME,get=NAME]`).
    pub hooks: Vec<HookRef>,
}

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookKind {
    /// After a buffer lands on the empty queue.
    Put,
    /// Before a dequeue from the empty queue.
    Get,
}

impl std::fmt::Display for HookKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HookKind::Put => "put",
            HookKind::Get => "get",
        })
    }
}

/// A hook written on a queue: `put=NAME` or `get=NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRef {
    /// When it runs.
    pub kind: HookKind,
    /// The hook's registered name.
    pub name: String,
    /// Line.
    pub line: usize,
    /// Column of `put` or `get`.
    pub col: usize,
}

/// Bytes a free list's buffers keep before and after their data, where written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Room {
    /// `headroom=`: bytes before the data.
    pub headroom: Option<usize>,
    /// `tailroom=`: bytes after the data.
    pub tailroom: Option<usize>,
}

/// A free list written on a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolRef {
    /// Pool name.
    pub name: String,
    /// Line.
    pub line: usize,
    /// Column.
    pub col: usize,
    /// (count, size) if declared here.
    pub shape: Option<(usize, usize)>,
    /// Headroom and tailroom written with the declaration.
    pub room: Room,
}

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Args,
    Inputs,
    Outputs,
}

struct Cursor<'a> {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    _src: &'a str,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

fn describe(c: Option<char>) -> String {
    match c {
        None => "end of line".into(),
        Some(c) => format!("'{c}'"),
    }
}

impl Cursor<'_> {
    fn col(&self) -> usize {
        self.pos + 1
    }
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(c) if c.is_whitespace()) {
            self.pos += 1;
        }
    }
    fn err(&self, expected: &str, hint: &str) -> PipelineError {
        PipelineError::Syntax {
            line: self.line,
            col: self.col(),
            expected: expected.into(),
            found: describe(self.peek()),
            hint: hint.into(),
        }
    }
    fn name(&mut self) -> Option<String> {
        let start = self.pos;
        while matches!(self.peek(), Some(c) if is_name_char(c)) {
            self.pos += 1;
        }
        (self.pos > start).then(|| self.chars[start..self.pos].iter().collect())
    }
    fn number(&mut self, what: &str) -> Result<usize, PipelineError> {
        self.size_value(what, false)
    }
    /// A size such as `16` or `64k`; zero only where `zero` allows it.
    fn size_value(&mut self, what: &str, zero: bool) -> Result<usize, PipelineError> {
        self.skip_ws();
        let col = self.col();
        let start = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric()) {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        match offhost_units::parse_size(&text) {
            Ok(n) if (zero || n > 0) && n <= usize::MAX as u64 => Ok(n as usize),
            _ => Err(PipelineError::Syntax {
                line: self.line,
                col,
                expected: what.into(),
                found: if text.is_empty() {
                    describe(self.chars.get(start).copied())
                } else {
                    format!("'{text}'")
                },
                hint: if zero {
                    "write a number, optionally with k, M or G (e.g. 0 or 4k)"
                } else {
                    "write a positive number, optionally with k, M or G (e.g. 16 or 64k)"
                }
                .into(),
            }),
        }
    }
    fn expect(&mut self, c: char, expected: &str, hint: &str) -> Result<(), PipelineError> {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(expected, hint))
        }
    }

    fn queue(&mut self) -> Result<QueueRef, PipelineError> {
        let (line, col) = (self.line, self.col());
        let name = self.name().ok_or_else(|| {
            let hint = match self.peek() {
                // `mix <a >b priority=interrupt`: `priority` was taken for a queue.
                Some('=') => "arguments (name=value) come before the queues: write the task, its arguments, then <inputs and >outputs (mix priority=interrupt <a >b)",
                _ => "queue names use letters, digits, '_', '-' and '.'",
            };
            self.err("a queue name", hint)
        })?;
        let save = self.pos;
        self.skip_ws();
        if self.peek() != Some(':') {
            self.pos = save;
            let hooks = self.hooks()?;
            return Ok(QueueRef {
                name,
                line,
                col,
                pool: None,
                hooks,
            });
        }
        self.pos += 1;
        self.skip_ws();
        let pcol = self.col();
        let pname = self.name().ok_or_else(|| {
            self.err(
                "a free list name after ':'",
                "write queue:free_list(count,size)",
            )
        })?;
        let save = self.pos;
        self.skip_ws();
        let mut room = Room::default();
        let shape = if self.peek() == Some('(') {
            self.pos += 1;
            let count = self.number("the number of buffers")?;
            self.expect(
                ',',
                "',' between the number and the size of buffers",
                "write free_list(count,size)",
            )?;
            let size = self.number("the size of the buffers")?;
            room = self.room()?;
            Some((count, size))
        } else {
            self.pos = save;
            None
        };
        let hooks = self.hooks()?;
        Ok(QueueRef {
            name,
            line,
            col,
            pool: Some(PoolRef {
                name: pname,
                line,
                col: pcol,
                shape,
                room,
            }),
            hooks,
        })
    }

    /// `,headroom=N,tailroom=N)` after a free list's count and size, either or both, up to
    /// and including the `)`.
    fn room(&mut self) -> Result<Room, PipelineError> {
        let mut room = Room::default();
        const HINT: &str =
            "write free_list(count,size) or free_list(count,size,headroom=N,tailroom=N)";
        loop {
            self.skip_ws();
            match self.peek() {
                Some(')') => {
                    self.pos += 1;
                    return Ok(room);
                }
                Some(',') => self.pos += 1,
                _ => return Err(self.err("')' closing the free list", HINT)),
            }
            self.skip_ws();
            let at = self.pos;
            let key = self.name();
            let slot = match key.as_deref() {
                Some("headroom") => &mut room.headroom,
                Some("tailroom") => &mut room.tailroom,
                _ => {
                    self.pos = at;
                    return Err(self.err("headroom= or tailroom=", HINT));
                }
            };
            if slot.is_some() {
                self.pos = at;
                return Err(self.err(
                    "each of headroom= and tailroom= once",
                    "this one is written twice",
                ));
            }
            self.expect('=', "'=' after the name", HINT)?;
            *slot = Some(self.size_value("a number of bytes", true)?);
        }
    }

    /// `[put=NAME,get=NAME]` right after a queue (and its free list), if there.
    fn hooks(&mut self) -> Result<Vec<HookRef>, PipelineError> {
        const HINT: &str = "write queue[put=HOOK], queue[get=HOOK] or queue[put=HOOK,get=HOOK]";
        let mut hooks: Vec<HookRef> = Vec::new();
        if self.peek() != Some('[') {
            return Ok(hooks);
        }
        self.pos += 1;
        loop {
            self.skip_ws();
            let col = self.col();
            let kind = match self.name().as_deref() {
                Some("put") => HookKind::Put,
                Some("get") => HookKind::Get,
                _ => {
                    self.pos = col - 1;
                    return Err(self.err("put= or get=", HINT));
                }
            };
            if hooks.iter().any(|h| h.kind == kind) {
                self.pos = col - 1;
                return Err(self.err(
                    &format!("one {kind} hook per queue"),
                    "a queue runs one hook of each kind",
                ));
            }
            self.expect('=', &format!("'=' after '{kind}'"), HINT)?;
            self.skip_ws();
            let name = self.name().ok_or_else(|| self.err("a hook name", HINT))?;
            hooks.push(HookRef {
                kind,
                name,
                line: self.line,
                col,
            });
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(']') => {
                    self.pos += 1;
                    return Ok(hooks);
                }
                _ => return Err(self.err("',' or ']'", HINT)),
            }
        }
    }

    fn arg(&mut self) -> Result<ArgTok, PipelineError> {
        let (line, col) = (self.line, self.col());
        if self.peek() == Some('"') {
            let value = self.quoted()?;
            return Ok(ArgTok {
                key: None,
                value,
                line,
                col,
            });
        }
        let start = self.pos;
        while matches!(self.peek(), Some(c) if !c.is_whitespace() && c != '<' && c != '>' && c != '=' && c != '"')
        {
            self.pos += 1;
        }
        let word: String = self.chars[start..self.pos].iter().collect();
        if self.peek() != Some('=') {
            return Ok(ArgTok {
                key: None,
                value: word,
                line,
                col,
            });
        }
        if word.is_empty() || !word.chars().all(is_name_char) {
            return Err(PipelineError::Syntax {
                line,
                col,
                expected: "an argument name before '='".into(),
                found: describe(Some(word.chars().next().unwrap_or('='))),
                hint: "write key=value".into(),
            });
        }
        self.pos += 1;
        let value = if self.peek() == Some('"') {
            self.quoted()?
        } else {
            let vstart = self.pos;
            while matches!(self.peek(), Some(c) if !c.is_whitespace() && c != '<' && c != '>' && c != '"')
            {
                self.pos += 1;
            }
            if self.pos == vstart {
                return Err(self.err(
                    &format!("a value after '{word}='"),
                    "write key=value with no spaces around '='",
                ));
            }
            self.chars[vstart..self.pos].iter().collect()
        };
        Ok(ArgTok {
            key: Some(word),
            value,
            line,
            col,
        })
    }

    fn quoted(&mut self) -> Result<String, PipelineError> {
        let open = self.col();
        self.pos += 1;
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c == '"' {
                let s = self.chars[start..self.pos].iter().collect();
                self.pos += 1;
                return Ok(s);
            }
            self.pos += 1;
        }
        Err(PipelineError::Syntax {
            line: self.line,
            col: self.col(),
            expected: "a closing '\"'".into(),
            found: "end of line".into(),
            hint: format!("the quote opened at column {open} is not closed"),
        })
    }
}

/// Strips a `#` comment that is not inside quotes.
fn strip_comment(line: &str) -> &str {
    let mut in_quote = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_quote = !in_quote,
            '#' if !in_quote => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Parses pipeline text. Only the grammar is checked here; [`crate::Pipeline::build`] checks
/// the graph.
pub fn parse(text: &str) -> Result<Spec, PipelineError> {
    let mut tasks: Vec<TaskLine> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let body = strip_comment(raw);
        let mut cur = Cursor {
            chars: body.chars().collect(),
            pos: 0,
            line: i + 1,
            _src: raw,
        };
        cur.skip_ws();
        let Some(first) = cur.peek() else { continue };
        let mut section = Section::Args;
        let mut task = if first == '<' || first == '>' {
            match tasks.pop() {
                Some(t) => t,
                None => {
                    return Err(cur.err(
                        "a task name",
                        "a line starting with '<' or '>' continues the task above it",
                    ))
                }
            }
        } else {
            let col = cur.col();
            if !first.is_ascii_alphabetic() {
                return Err(cur.err("a task name", "each line is: command args <inputs >outputs"));
            }
            let command = cur.name().unwrap_or_default();
            if let Some(c) = cur.peek() {
                if !c.is_whitespace() && c != '<' && c != '>' {
                    return Err(cur.err(
                        "a space, '<' or '>' after the task name",
                        "task names use letters, digits, '_', '-' and '.'",
                    ));
                }
            }
            TaskLine {
                command,
                line: i + 1,
                col,
                args: Vec::new(),
                inputs: Vec::new(),
                outputs: Vec::new(),
                engine: None,
            }
        };
        loop {
            cur.skip_ws();
            match cur.peek() {
                None => break,
                Some('<') => {
                    cur.pos += 1;
                    section = Section::Inputs;
                    cur.skip_ws();
                    task.inputs.push(cur.queue()?);
                }
                Some('>') => {
                    cur.pos += 1;
                    section = Section::Outputs;
                    cur.skip_ws();
                    task.outputs.push(cur.queue()?);
                }
                Some('@') => {
                    let col = cur.col();
                    cur.pos += 1;
                    let Some(name) = cur.name() else {
                        return Err(cur.err(
                            "an engine name after '@'",
                            "write @NAME with letters, digits, '_', '-' and '.' to place the task",
                        ));
                    };
                    if let Some(p) = &task.engine {
                        if p.name != name {
                            return Err(PipelineError::Syntax {
                                line: i + 1,
                                col,
                                expected: format!(
                                    "one placement (the task is already @{})",
                                    p.name
                                ),
                                found: format!("'@{name}'"),
                                hint: "a task runs on one engine".into(),
                            });
                        }
                    }
                    task.engine = Some(Placement {
                        name,
                        line: i + 1,
                        col,
                    });
                }
                Some(_) => match section {
                    Section::Args => task.args.push(cur.arg()?),
                    Section::Inputs => task.inputs.push(cur.queue()?),
                    Section::Outputs => task.outputs.push(cur.queue()?),
                },
            }
        }
        tasks.push(task);
    }
    if tasks.is_empty() {
        return Err(PipelineError::Empty);
    }
    Ok(Spec { tasks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_are_read_anywhere_on_a_task_line() {
        let s = parse("a @one >q\nb <q @two.x >r\n  >s @two.x\nc <r <s\n").unwrap();
        let on: Vec<Option<&str>> = s
            .tasks
            .iter()
            .map(|t| t.engine.as_ref().map(|p| p.name.as_str()))
            .collect();
        assert_eq!(on, [Some("one"), Some("two.x"), None]);
        assert_eq!(s.tasks[1].outputs.len(), 2);
        assert_eq!(s.tasks[0].engine.as_ref().unwrap().col, 3);
        let e = parse("a @one @two >q\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("@two"), "{e}");
        let e = parse("a @ >q\n").unwrap_err().to_string();
        assert!(e.contains("an engine name after '@'"), "{e}");
    }

    #[test]
    fn parses_the_seed_form() {
        let s = parse(
            "# audio\ntone freq=440   >a:fl(8, 4k)\nmix<a >b\n   >c  # continues mix\nnull <b\nnull<c\n",
        )
        .unwrap();
        assert_eq!(s.tasks.len(), 4);
        let t = &s.tasks[0];
        assert_eq!(t.command, "tone");
        assert_eq!(t.args[0].key.as_deref(), Some("freq"));
        assert_eq!(t.outputs[0].pool.as_ref().unwrap().shape, Some((8, 4096)));
        let mix = &s.tasks[1];
        assert_eq!(mix.inputs[0].name, "a");
        assert_eq!(mix.outputs.len(), 2);
        assert_eq!((mix.outputs[1].line, mix.outputs[1].col), (4, 5));
    }

    #[test]
    fn quoted_values_and_positional_args() {
        let s = parse("file \"my file.raw\" chunk=4k >q\nnull <q").unwrap();
        assert_eq!(s.tasks[0].args[0].value, "my file.raw");
        assert_eq!(s.tasks[0].args[0].key, None);
    }

    #[test]
    fn syntax_errors_name_line_column_and_expectation() {
        let e = parse("tone >a\nmix <a >b:fl(8,\n").unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.position(), (2, 16), "{msg}");
        assert!(msg.contains("expected the size of the buffers"), "{msg}");
        let e = parse("tone >a:fl(8 4096)").unwrap_err();
        assert!(e.to_string().contains("expected ','"), "{e}");
        assert_eq!(e.position(), (1, 14));
        let e = parse("tone > \nnull <a").unwrap_err();
        assert_eq!(e.position(), (1, 8));
        assert!(e.to_string().contains("a queue name"), "{e}");
        let e = parse(">a").unwrap_err();
        assert!(e.to_string().contains("continues the task above"), "{e}");
        let e = parse("tone >a\nmix <a >b priority=interrupt\n").unwrap_err();
        assert_eq!(e.position(), (2, 19));
        assert!(
            e.to_string()
                .contains("arguments (name=value) come before the queues"),
            "{e}"
        );
        let e = parse("file \"x >a").unwrap_err();
        assert!(e.to_string().contains("closing"), "{e}");
        assert_eq!(parse("# nothing\n\n").unwrap_err(), PipelineError::Empty);
    }
}
