//! The server-sent events that keep a run's page live: the engine's events as they are
//! appended (`engine`), the whole state whenever it changed (`state`, with the page's sections
//! rendered by `pages.rs`), and `end` once the run's process is gone. Polling, not
//! notification (see `live.rs`).

use super::live::{events_file, RunState};
use super::{blocking, App, Failure};
use crate::run_events::EventLine;
use axum::extract::{Path as UrlPath, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// Events sent per `state` refresh at most (a long run's file is read from where the page is).
const EVENTS_PER_READ: usize = 500;

/// The engine's event as the page's log shows it.
#[derive(Serialize)]
struct EngineView<'a> {
    seq: u64,
    t_s: f64,
    text: String,
    event: &'a ksmith_search::Event,
}

/// The `state` event: the document and the page's sections rendered from it.
#[derive(Serialize)]
struct StateEvent<'a> {
    state: &'a RunState,
    sections: super::pages::Sections,
}

/// What the stream still has to send, and where it stands.
struct Stream {
    app: Arc<App>,
    run: String,
    next_event: u64,
    last_state: Option<RunState>,
    queue: VecDeque<SseEvent>,
    first: bool,
    ended: bool,
}

/// How often the stream looks at the store and the events file.
const POLL: Duration = Duration::from_millis(400);

/// Reads what is new: the events appended since the last read, the state when it changed,
/// `end` once the run's process is gone.
fn poll(s: &mut Stream) -> Result<(), Failure> {
    let path = events_file(&s.app.ctx.store_dir, &s.run);
    let events: Vec<EventLine> =
        crate::mcp::runs::read_events(&path, s.next_event).map_err(Failure::server)?;
    for e in events.iter().take(EVENTS_PER_READ) {
        s.next_event = e.seq + 1;
        let view = EngineView {
            seq: e.seq,
            t_s: e.t_s,
            text: crate::mcp::runs::event_text(&e.event),
            event: &e.event,
        };
        if let Ok(ev) = SseEvent::default().event("engine").json_data(&view) {
            s.queue.push_back(ev.id(e.seq.to_string()));
        }
    }
    let Some(state) = RunState::read(&s.app, &s.run)? else {
        s.queue
            .push_back(SseEvent::default().event("end").data("no such run"));
        s.ended = true;
        return Ok(());
    };
    if s.last_state.as_ref() != Some(&state) {
        let doc = StateEvent {
            sections: super::pages::sections(&state),
            state: &state,
        };
        if let Ok(ev) = SseEvent::default().event("state").json_data(&doc) {
            s.queue.push_back(ev);
        }
    }
    // Once the process is gone and every event was sent, nothing more will come.
    if !state.running && events.len() <= EVENTS_PER_READ {
        s.queue
            .push_back(SseEvent::default().event("end").data(state.status.clone()));
        s.ended = true;
    }
    s.last_state = Some(state);
    Ok(())
}

/// `/runs/RUN/events`: the run's live stream.
pub(super) async fn events(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
) -> Result<
    Sse<impl futures_util::Stream<Item = Result<SseEvent, std::convert::Infallible>>>,
    Failure,
> {
    let run = super::run_id(&run)?;
    let s = Stream {
        app,
        run,
        next_event: 0,
        last_state: None,
        queue: VecDeque::new(),
        first: true,
        ended: false,
    };
    let stream = futures_util::stream::unfold(s, |mut s| async move {
        loop {
            if let Some(ev) = s.queue.pop_front() {
                return Some((Ok(ev), s));
            }
            if s.ended {
                return None;
            }
            if !s.first {
                tokio::time::sleep(POLL).await;
            }
            s.first = false;
            s = match blocking(move || {
                let r = poll(&mut s);
                Ok((s, r))
            })
            .await
            {
                Ok((t, Ok(()))) => t,
                Ok((mut t, Err(e))) => {
                    // A store busy or unreadable for a moment: say so, try again next poll.
                    t.queue
                        .push_back(SseEvent::default().event("problem").data(e.1));
                    t
                }
                Err(_) => return None,
            };
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
