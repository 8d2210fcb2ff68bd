//! The load kit's worker (`loadkit/template.yaml`): one invocation is one slice of a sale's crowd.
//! Its event names the API, the event, the slice's users' tokens, the opening (epoch ms, the same
//! for every worker), the concurrency, the mode and its share of the rate; it waits for the
//! opening, runs loadgen's own rush on the slice and answers every user's requests
//! (`loadgen::fanout::run_slice`). `loadgen --fan-out` invokes it, merges the slices and checks
//! the sale. It calls nothing but the API it is given: its role holds its logs alone.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use loadgen::fanout::{SliceRequest, SliceResult, run_slice};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|event: LambdaEvent<SliceRequest>| async move {
        let (first, users) = (event.payload.first_user, event.payload.tokens.len());
        let result: Result<SliceResult, Error> = run_slice(event.payload).await.map_err(Error::from);
        // One line per invocation (no token, no address): which slice, how it went.
        match &result {
            Ok(r) => eprintln!(
                "slice of users {first}..{}: {} grabs answered in {:.3} s",
                first + users,
                r.users.len(),
                r.elapsed_us as f64 / 1e6
            ),
            Err(e) => eprintln!("slice of users {first}..{}: {e}", first + users),
        }
        result
    }))
    .await
}
