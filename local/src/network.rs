//! A slow network to AWS, for the fault tests and the campaign: production's calls can take
//! seconds (a congested link, an SDK's retries), and a protocol whose steps race must hold then.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A TCP proxy in front of `endpoint` (`http://host:port`) that holds each request back `delay`
/// (replies come straight back). Returns the endpoint to use instead; it lives as long as the
/// process.
pub async fn slow_network(endpoint: &str, delay: Duration) -> std::io::Result<String> {
    let target = endpoint.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                let Ok(outbound) = tokio::net::TcpStream::connect(&target).await else { return };
                let (mut from_client, mut to_client) = inbound.into_split();
                let (mut from_aws, mut to_aws) = outbound.into_split();
                let up = async {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                        tokio::time::sleep(delay).await;
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
