"""Test users of a deployed stack's Cognito user pool, signed in: the tokens `loadgen --tokens-file`
and `--admin-token` read (docs/DEPLOY.md, "Measuring an open before selling it").

    python3 loadkit/tokens.py create --pool <UserPoolId> --client <UserPoolClientId> \\
        --run lk1 --users 2000 --tokens tokens.txt --admin-token admin.txt
    python3 loadkit/tokens.py delete --pool <UserPoolId> --run lk1 --users 2000

`create` makes `--users` users and one organiser (in the pool's `admin` group) named after the run,
or finds them made by an earlier `create` of the same run, sets them a new random password and signs
each in (`AdminInitiateAuth`, the flow the product's client allows), writing one ID token a line, in
the users' order. An ID token lives an hour (the client's `IdTokenValidity`): run it again for new
ones. Their addresses are the SES mailbox simulator's (`success+<run>-<n>@simulator.amazonses.com`,
verified): the sale's confirmations are really sent, at the account's SES rate, and bounce nowhere.
`delete` removes the run's users. Any Python with boto3 runs it (the SAM CLI's own has it);
credentials, region and `AWS_ENDPOINT_URL` from the environment, as the AWS CLI reads them.
"""

import argparse
import secrets
import sys
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config


def email(run, n):
    return f"success+{run}-{n}@simulator.amazonses.com"


def client():
    # Cognito throttles each API per account ("user creation", "user authentication"): the SDK
    # waits and asks again rather than failing the run.
    return boto3.client("cognito-idp", config=Config(retries={"mode": "adaptive", "max_attempts": 20}))


def create(args):
    idp = client()
    # Long, random, and of every class the pool's policy may ask for.
    password = "Lk-" + secrets.token_urlsafe(24) + "a7Z"

    def one(n):
        address = email(args.run, n)
        try:
            idp.admin_create_user(UserPoolId=args.pool, Username=address, MessageAction="SUPPRESS",
                                  UserAttributes=[{"Name": "email", "Value": address},
                                                  {"Name": "email_verified", "Value": "true"}])
        except idp.exceptions.UsernameExistsException:
            pass
        idp.admin_set_user_password(UserPoolId=args.pool, Username=address, Password=password, Permanent=True)
        if n == "admin":
            idp.admin_add_user_to_group(UserPoolId=args.pool, Username=address, GroupName="admin")
        auth = idp.admin_initiate_auth(UserPoolId=args.pool, ClientId=args.client, AuthFlow="ADMIN_USER_PASSWORD_AUTH",
                                       AuthParameters={"USERNAME": address, "PASSWORD": password})
        return auth["AuthenticationResult"]["IdToken"]

    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        tokens = list(pool.map(one, ["admin"] + list(range(args.users))))
    with open(args.admin_token, "w") as f:
        f.write(tokens[0] + "\n")
    with open(args.tokens, "w") as f:
        f.write("\n".join(tokens[1:]) + "\n")
    print(f"tokens: {args.users} users of run {args.run} in {args.tokens}, the organiser's in {args.admin_token}",
          file=sys.stderr)


def delete(args):
    idp = client()

    def one(n):
        try:
            idp.admin_delete_user(UserPoolId=args.pool, Username=email(args.run, n))
            return 1
        except idp.exceptions.UserNotFoundException:
            return 0

    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        gone = sum(pool.map(one, ["admin"] + list(range(args.users))))
    print(f"tokens: {gone} users of run {args.run} deleted", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["create", "delete"])
    parser.add_argument("--pool", required=True, help="the stack's UserPoolId output")
    parser.add_argument("--client", help="the stack's UserPoolClientId output (create)")
    parser.add_argument("--run", required=True, help="names this run's users (letters, digits, -)")
    parser.add_argument("--users", type=int, required=True)
    parser.add_argument("--tokens", default="tokens.txt")
    parser.add_argument("--admin-token", default="admin.txt")
    parser.add_argument("--threads", type=int, default=8, help="requests to Cognito at once")
    args = parser.parse_args()
    if args.command == "create":
        if not args.client:
            parser.error("create needs --client")
        create(args)
    else:
        delete(args)


if __name__ == "__main__":
    main()
