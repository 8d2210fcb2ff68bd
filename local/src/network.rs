//! Networks to AWS for the fault tests and the campaign: production's calls can take seconds (a
//! congested link, an SDK's retries), and a protocol whose steps race must hold then.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::watch,
};

/// A TCP proxy in front of `endpoint` (`http://host:port`) that holds each request back `delay`
/// (replies come straight back). Returns the endpoint to use instead; it lives as long as the
/// process.
pub async fn slow_network(endpoint: &str, delay: Duration) -> std::io::Result<String> {
    proxy(endpoint, move |_: &[u8]| tokio::time::sleep(delay)).await
}

/// A network a test shuts: while shut, every request waits at the proxy until it is opened again,
/// and the test can wait until a request is held, so a step that comes after a call to AWS is
/// known not to have run yet (no sleep-and-hope).
#[derive(Clone)]
pub struct Valve {
    shut: watch::Sender<bool>,
    held: Arc<AtomicUsize>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Valve {
    /// Requests wait from now on.
    pub fn shut(&self) {
        self.shut.send_replace(true);
    }

    /// Every held request goes on, and new ones pass.
    pub fn open(&self) {
        self.shut.send_replace(false);
    }

    /// Returns once at least `n` requests are held.
    pub async fn held(&self, n: usize) {
        loop {
            let arrived = self.arrived.notified();
            if self.held.load(Ordering::SeqCst) >= n {
                return;
            }
            arrived.await;
        }
    }
}

/// A proxy in front of `endpoint` whose [`Valve`] the caller shuts and opens (open at first).
pub async fn valve_network(endpoint: &str) -> std::io::Result<(String, Valve)> {
    let valve =
        Valve { shut: watch::channel(false).0, held: Arc::default(), arrived: Arc::new(tokio::sync::Notify::new()) };
    let at = valve.clone();
    let addr = proxy(endpoint, move |_: &[u8]| {
        let valve = at.clone();
        async move {
            let mut shut = valve.shut.subscribe();
            if !*shut.borrow_and_update() {
                return;
            }
            valve.held.fetch_add(1, Ordering::SeqCst);
            valve.arrived.notify_waiters();
            let _ = shut.wait_for(|shut| !*shut).await;
            valve.held.fetch_sub(1, Ordering::SeqCst);
        }
    })
    .await?;
    Ok((addr, valve))
}

/// A network whose open connections a test severs without a word: after [`Severable::sever`],
/// what either side sends on a connection made before goes nowhere (no FIN, no RST: a silent
/// peer, as a NAT that forgot the flow or a frozen environment's dead link), while connections made
/// after pass as before.
#[derive(Clone, Default)]
pub struct Severable {
    generation: Arc<AtomicUsize>,
}

impl Severable {
    /// Every connection open now goes silent.
    pub fn sever(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// A proxy in front of `endpoint` (`http://host:port` or `host:port`) whose connections the
/// caller severs ([`Severable`]).
pub async fn severable_network(endpoint: &str) -> std::io::Result<(String, Severable)> {
    let target = endpoint.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let severable = Severable::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let at = severable.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let (target, at) = (target.clone(), at.clone());
            let born = at.generation.load(Ordering::SeqCst);
            tokio::spawn(async move {
                let Ok(outbound) = tokio::net::TcpStream::connect(&target).await else { return };
                let (from_client, to_client) = inbound.into_split();
                let (from_server, to_server) = outbound.into_split();
                let (up, down) = (
                    pass_unless_severed(from_client, to_server, at.clone(), born),
                    pass_unless_severed(from_server, to_client, at.clone(), born),
                );
                tokio::join!(up, down);
            });
        }
    });
    Ok((format!("http://{addr}"), severable))
}

/// Copies `from` to `to` while the connection (made in generation `born`) is not severed; severed,
/// a chunk is read and dropped: the sender sees it taken, and nothing comes back.
async fn pass_unless_severed(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    severable: Severable,
    born: usize,
) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        if severable.generation.load(Ordering::SeqCst) == born && to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
}

/// A network that counts the AWS calls made through it, by operation.
#[derive(Clone, Default)]
pub struct Counted {
    calls: Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>,
}

impl Counted {
    /// How many calls of `target` (an `X-Amz-Target`, e.g. `secretsmanager.GetSecretValue`) passed.
    pub fn of(&self, target: &str) -> usize {
        self.calls.lock().unwrap().get(target).copied().unwrap_or(0)
    }
}

/// A proxy in front of `endpoint` that counts the calls through it ([`Counted`]; the JSON
/// protocols' calls, which name their operation in `X-Amz-Target`).
pub async fn counted_network(endpoint: &str) -> std::io::Result<(String, Counted)> {
    let counted = Counted::default();
    let at = counted.clone();
    let addr = proxy(endpoint, move |chunk: &[u8]| {
        let text = String::from_utf8_lossy(chunk);
        let mut calls = at.calls.lock().unwrap();
        for line in text.lines() {
            if let Some((name, value)) = line.split_once(':')
                && name.trim().eq_ignore_ascii_case("x-amz-target")
            {
                *calls.entry(value.trim().to_owned()).or_default() += 1;
            }
        }
        std::future::ready(())
    })
    .await?;
    Ok((addr, counted))
}

/// A TCP proxy in front of `endpoint` that awaits `hold(chunk)` before it forwards each chunk a
/// client sends (replies come straight back).
async fn proxy<F, H>(endpoint: &str, hold: H) -> std::io::Result<String>
where
    H: Fn(&[u8]) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = ()> + Send,
{
    let target = endpoint.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let (target, hold) = (target.clone(), hold.clone());
            tokio::spawn(async move {
                let Ok(outbound) = tokio::net::TcpStream::connect(&target).await else { return };
                let (mut from_client, mut to_client) = inbound.into_split();
                let (mut from_aws, mut to_aws) = outbound.into_split();
                let up = async {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                        hold(&buf[..n]).await;
                        if to_aws.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = to_aws.shutdown().await;
                };
                let down = tokio::io::copy(&mut from_aws, &mut to_client);
                let _ = tokio::join!(up, down);
            });
        }
    });
    Ok(format!("http://{addr}"))
}
