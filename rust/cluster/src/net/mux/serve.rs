//! The leader's side of a link: the handshake, then each session the follower
//! opens is read for its attach request and served as an attached session's
//! connection was (`attach.rs`).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::watch;

use super::{run, Link, MuxStream};
use crate::identity::Identity;
use crate::net::{attach, wire, NetConfig};

type Serving = watch::Receiver<Option<(u64, beanpole_engine::server::Admin)>>;

/// Serve a link whose opening frame's body is `body`, until it breaks: on the
/// runtime `config.links_on` names when it names one (the task then ends
/// with this call's future).
pub async fn serve(
    mut stream: TcpStream,
    body: &[u8],
    identity: Arc<Identity>,
    config: &NetConfig,
) -> io::Result<()> {
    let me = identity.node();
    let cluster = identity.cluster();
    // A node's own forwarder links to it too once it leads.
    let welcome = match wire::read_hello(body) {
        Some(h) if h.to == me && !cluster.is_unset() && h.cluster == cluster => true,
        Some(_) => false,
        None => {
            let refusal = wire::refused("not a beanpole link of this version");
            return wire::write_frame(&mut stream, &refusal).await;
        }
    };
    if !welcome {
        let reason = format!("this is node {me} of another cluster or not the node asked");
        return wire::write_frame(&mut stream, &wire::refused(&reason)).await;
    }
    wire::write_frame(&mut stream, &wire::welcome(me, cluster)).await?;
    let serving = config.serving.clone();
    let (max_frame, timeout) = (config.max_frame, config.frame_timeout);
    let work = async move {
        let accept = move |s: MuxStream| {
            tokio::spawn(session(
                s,
                Arc::clone(&identity),
                serving.clone(),
                max_frame,
                timeout,
            ));
        };
        run(Arc::new(Link::new("")), stream, Some(&accept)).await;
    };
    // On the runtime of the server the link's sessions go to, so that a frame
    // wakes their tasks on their own threads; else on the one set aside.
    let engine = serving_now(config).and_then(|a| a.runtime());
    match engine.as_ref().or(config.links_on.as_ref()) {
        Some(runtime) => {
            // Aborted with this future (the peer server's stop aborts it).
            struct Abort(tokio::task::JoinHandle<()>);
            impl Drop for Abort {
                fn drop(&mut self) {
                    self.0.abort();
                }
            }
            let mut task = Abort(runtime.spawn(work));
            let _ = (&mut task.0).await;
        }
        None => work.await,
    }
    Ok(())
}

fn serving_now(config: &NetConfig) -> Option<beanpole_engine::server::Admin> {
    let serving = config.serving.as_ref()?;
    let now = serving.borrow();
    now.as_ref().map(|(_, a)| a.clone())
}

/// One session: its attach request, then the engine's.
async fn session(
    mut stream: MuxStream,
    identity: Arc<Identity>,
    serving: Option<Serving>,
    max_frame: usize,
    timeout: Duration,
) {
    let first = tokio::time::timeout(timeout, wire::read_frame(&mut stream, max_frame)).await;
    let Ok(Ok((kind, body))) = first else {
        return;
    };
    if kind != attach::ATTACH {
        let refusal = wire::refused("a session must start with an attach");
        let _ = wire::write_frame(&mut stream, &refusal).await;
        return;
    }
    let _ = attach::serve(stream, &body, &identity, serving.as_ref()).await;
}
