//! Where the chat reads what a person types: a line editor with history
//! on a terminal (`rustyline`), plain lines from anything else (a pipe,
//! the tests).
//!
//! Owns: reading one line after a prompt. Must never: block the async
//! runtime (the editor reads on a thread of its own).

use std::future::Future;
use std::io;
use std::pin::Pin;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// A line, `None` once the input ended (or the person left: Ctrl-D, Ctrl-C).
pub type Line<'a> = Pin<Box<dyn Future<Output = io::Result<Option<String>>> + Send + 'a>>;

/// Reads lines after prompts.
pub trait LineSource: Send {
    /// Reads one line; `prompt` is shown first when the source shows its
    /// own prompts (see [`LineSource::shows_prompts`]).
    fn read_line<'a>(&'a mut self, prompt: &'a str) -> Line<'a>;

    /// Whether the source shows the prompt itself (the editor does; the
    /// session writes it before a plain read).
    fn shows_prompts(&self) -> bool;
}

/// Plain lines from a reader.
pub struct Piped<R>(pub R);

impl<R: AsyncBufRead + Unpin + Send> LineSource for Piped<R> {
    fn read_line<'a>(&'a mut self, _prompt: &'a str) -> Line<'a> {
        Box::pin(async move {
            let mut line = String::new();
            if self.0.read_line(&mut line).await? == 0 {
                return Ok(None);
            }
            Ok(Some(line.trim().to_owned()))
        })
    }

    fn shows_prompts(&self) -> bool {
        false
    }
}

/// Most lines the editor's history keeps.
pub const HISTORY_LINES: usize = 1_000;

/// A line editor with history, for a terminal.
pub struct Editor {
    editor: Option<rustyline::DefaultEditor>,
}

impl Editor {
    pub fn new() -> io::Result<Self> {
        let config = rustyline::Config::builder()
            .max_history_size(HISTORY_LINES)
            .map_err(io::Error::other)?
            .auto_add_history(false)
            .build();
        let editor = rustyline::DefaultEditor::with_config(config).map_err(io::Error::other)?;
        Ok(Self {
            editor: Some(editor),
        })
    }
}

impl LineSource for Editor {
    fn read_line<'a>(&'a mut self, prompt: &'a str) -> Line<'a> {
        Box::pin(async move {
            let Some(mut editor) = self.editor.take() else {
                return Ok(None);
            };
            let prompt = prompt.to_owned();
            let (editor, read) = tokio::task::spawn_blocking(move || {
                let read = editor.readline(&prompt);
                (editor, read)
            })
            .await
            .map_err(io::Error::other)?;
            self.editor = Some(editor);
            match read {
                Ok(line) => {
                    let line = line.trim().to_owned();
                    if !line.is_empty()
                        && let Some(editor) = self.editor.as_mut()
                    {
                        let _ = editor.add_history_entry(line.as_str());
                    }
                    Ok(Some(line))
                }
                Err(
                    rustyline::error::ReadlineError::Eof
                    | rustyline::error::ReadlineError::Interrupted,
                ) => Ok(None),
                Err(error) => Err(io::Error::other(error)),
            }
        })
    }

    fn shows_prompts(&self) -> bool {
        true
    }
}
