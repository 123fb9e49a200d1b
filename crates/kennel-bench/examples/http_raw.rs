//! The raw floor of the HTTP bench (`bench/http.sh`): the least any server
//! can do for an echo job on this host, with no async runtime at all.
//! Blocking std sockets and pipes, one OS thread per connection, the
//! request's head parsed with `httparse` (the parser hyper uses), the body
//! read to its `Content-Length`, and the answer written with one
//! `write_all`. Each wait is a blocking `read` that the kernel wakes
//! directly, where an async server waits in `epoll_wait` and reads after.
//! The route does the job one of two ways:
//!
//! - by default, on one child (the same echo worker) behind a std
//!   `Mutex`: the body and its newline in one write to its stdin, then one
//!   line from its stdout (**the raw floor**);
//! - with `--bare`, not at all: the route answers the body it was sent
//!   (**the raw HTTP exchange alone**).
//!
//! It answers any path and method the same way, keeps connections alive,
//! and answers a request without a `Content-Length`, or one it cannot
//! parse, with `400` and closes the connection. It is a measuring stick,
//! not a server: no timeouts, no limits beyond its 64 KiB buffer.
//!
//! ```text
//! cargo run --release -p kennel-bench --example http_raw -- [--bare] WORKER [ADDR]
//! ```
//!
//! It prints `floor listening on http://ADDR` once the worker is ready
//! (with `--bare`, at once: no worker is started), and runs until it is
//! killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

/// Requests larger than this, head and body, are refused.
const BUFFER: usize = 64 * 1024;

struct Child {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Held for as long as the server. When the server ends, the child's
    /// stdin closes and the echo worker exits.
    _process: std::process::Child,
}

/// What a request's head says, once it is whole.
enum Head {
    /// The head's length and the body's.
    Whole { head: usize, body: usize },
    /// More bytes are needed.
    Partial,
    /// Not a request this floor answers.
    Bad,
}

fn parse(bytes: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(bytes) {
        Ok(httparse::Status::Complete(head)) => {
            let length = request
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok());
            match length {
                Some(body) if head + body <= BUFFER => Head::Whole { head, body },
                _ => Head::Bad,
            }
        }
        Ok(httparse::Status::Partial) => Head::Partial,
        Err(_) => Head::Bad,
    }
}

/// The job: the worker's line for the body, or the body itself (`--bare`).
fn job(child: Option<&Mutex<Child>>, body: &[u8], line: &mut Vec<u8>) -> std::io::Result<()> {
    line.clear();
    let Some(child) = child else {
        line.extend_from_slice(body);
        return Ok(());
    };
    let mut child = child
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut request = Vec::with_capacity(body.len() + 1);
    request.extend_from_slice(body);
    request.push(b'\n');
    child.stdin.write_all(&request)?;
    child.stdout.read_until(b'\n', line)?;
    while line.last().is_some_and(u8::is_ascii_whitespace) {
        line.pop();
    }
    Ok(())
}

/// Answers one connection's requests until it closes.
fn serve(mut stream: TcpStream, child: Option<&Mutex<Child>>) -> std::io::Result<()> {
    let mut buffer = vec![0_u8; BUFFER];
    let mut filled = 0;
    let mut line = Vec::with_capacity(1024);
    let mut answer = Vec::with_capacity(1024);
    loop {
        let (head, body) = loop {
            match parse(&buffer[..filled]) {
                Head::Whole { head, body } if filled >= head + body => break (head, body),
                Head::Bad => {
                    stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")?;
                    return Ok(());
                }
                Head::Whole { .. } | Head::Partial if filled == BUFFER => return Ok(()),
                Head::Whole { .. } | Head::Partial => {}
            }
            match stream.read(&mut buffer[filled..])? {
                0 => return Ok(()),
                n => filled += n,
            }
        };
        job(child, &buffer[head..head + body], &mut line)?;
        answer.clear();
        write!(
            answer,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            line.len()
        )?;
        answer.extend_from_slice(&line);
        stream.write_all(&answer)?;
        buffer.copy_within(head + body..filled, 0);
        filled -= head + body;
    }
}

fn start(worker: &str) -> std::io::Result<Child> {
    let mut process = Command::new(worker)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdin = process.stdin.take().expect("piped");
    let mut stdout = BufReader::new(process.stdout.take().expect("piped"));
    let mut ready = Vec::new();
    stdout.read_until(b'\n', &mut ready)?;
    Ok(Child {
        stdin,
        stdout,
        _process: process,
    })
}

fn main() -> std::io::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let bare = args.first().is_some_and(|a| a == "--bare");
    if bare {
        args.remove(0);
    }
    let mut args = args.into_iter();
    let worker = args.next().expect("usage: http_raw [--bare] WORKER [ADDR]");
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let child = if bare {
        None
    } else {
        Some(Arc::new(Mutex::new(start(&worker)?)))
    };
    let listener = TcpListener::bind(addr)?;
    println!("floor listening on http://{}", listener.local_addr()?);
    for stream in listener.incoming() {
        // A connection that failed to arrive (or to take TCP_NODELAY) is
        // dropped; the server goes on.
        let Ok(stream) = stream else { continue };
        if stream.set_nodelay(true).is_err() {
            continue;
        }
        let child = child.clone();
        std::thread::spawn(move || serve(stream, child.as_deref()));
    }
    Ok(())
}
