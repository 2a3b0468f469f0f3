//! Command-line options (hand-parsed: `--name value` or `--name=value`).

use std::fmt::Write as _;

pub const USAGE: &str = "\
usage: beanpole-bench SCENARIO [options]

Drives any beanstalkd-protocol server and prints one JSON line with the results.
Every reply is checked against the command it answers and every reserved body
against what was put; any error makes the exit status 1 (2 for a usage error).

scenarios:
  put             puts only (--connections, --pipeline)
  reserve-delete  pre-fills --jobs jobs, then measures reserve + delete
  rt              --producers and --consumers at once; latency is put -> RESERVED
  many-tubes      like rt, jobs spread over --tubes tubes, consumers watch them all
  delayed         like rt with --delay; latency is lateness past the due time
  storm           --connections loops of connect, use, put, quit (ops = connections)
  big             like rt with 64 KiB bodies (unless --body-size); the server needs a
                  max job size of at least 65536 (beanstalkd -z 65536)
  idle            opens --connections idle connections and holds them until stdin
                  closes or --hold seconds pass (the JSON line is printed once all are open)

options:
  --host H             server address [127.0.0.1]
  --port P             server port [11300]
  --connections N      connections (rt-like: split into producers and consumers) [1]
  --producers N        producer connections (rt, many-tubes, delayed, big)
  --consumers N        consumer connections (rt, many-tubes, delayed, big)
  --pipeline N         commands written in one batch per connection before reading [1]
  --body-size B        body bytes, at least 45 [100; big: 65536]
  --jobs N             jobs (or storm connections) in the run [100000]
  --duration S         run for S seconds instead of a job count
  --rate R             open loop: R puts (storm: connections) per second in total
  --tubes K            tubes (many-tubes) [1]
  --window N           rt, many-tubes, big: at most N jobs put and not yet reserved
                       (0: no limit) [2 x (producers + consumers) x pipeline; delayed: 0]
  --delay S            put delay in seconds [delayed: 1, others: 0]
  --pri N              put priority [1024]
  --ttr S              put time-to-run [120]
  --server-pid PID     read the server's CPU time from /proc/PID/stat
  --threads N          client OS threads [1]
  --runtime KIND       current (one current-thread runtime per thread) | multi [current]
  --stall S            abort when no operation completes for S seconds [10]
  --timeout S          abort the run after S seconds in all [600]
  --hold S             idle: hold the connections at most S seconds [60]
  --tls-ca FILE        connect with TLS, trusting the CA certificates (PEM) in FILE
";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Put,
    ReserveDelete,
    Rt,
    ManyTubes,
    Delayed,
    Storm,
    Big,
    Idle,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Put => "put",
            Scenario::ReserveDelete => "reserve-delete",
            Scenario::Rt => "rt",
            Scenario::ManyTubes => "many-tubes",
            Scenario::Delayed => "delayed",
            Scenario::Storm => "storm",
            Scenario::Big => "big",
            Scenario::Idle => "idle",
        }
    }

    fn parse(s: &str) -> Option<Scenario> {
        [
            Scenario::Put,
            Scenario::ReserveDelete,
            Scenario::Rt,
            Scenario::ManyTubes,
            Scenario::Delayed,
            Scenario::Storm,
            Scenario::Big,
            Scenario::Idle,
        ]
        .into_iter()
        .find(|sc| sc.name() == s)
    }

    /// Scenarios with producers and consumers running at once.
    pub fn is_flow(self) -> bool {
        matches!(
            self,
            Scenario::Rt | Scenario::ManyTubes | Scenario::Delayed | Scenario::Big
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    Current,
    Multi,
}

#[derive(Debug, Clone)]
pub struct Opts {
    pub scenario: Scenario,
    pub host: String,
    pub port: u16,
    pub connections: usize,
    pub producers: usize,
    pub consumers: usize,
    pub pipeline: usize,
    pub body_size: usize,
    pub jobs: Option<u64>,
    pub duration: Option<f64>,
    pub rate: Option<f64>,
    pub tubes: usize,
    pub window: Option<u64>,
    pub delay: u32,
    pub pri: u32,
    pub ttr: u32,
    pub server_pid: Option<u32>,
    pub threads: usize,
    pub runtime: RuntimeKind,
    pub stall: f64,
    pub timeout: f64,
    pub hold: f64,
    pub tls_ca: Option<String>,
}

fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("--{name}: {v:?} is not a valid number"))
}

fn positive<T: std::str::FromStr + PartialOrd + Default>(name: &str, v: &str) -> Result<T, String> {
    let x: T = num(name, v)?;
    if x <= T::default() {
        return Err(format!("--{name} must be greater than 0"));
    }
    Ok(x)
}

pub fn parse(args: &[String]) -> Result<Opts, String> {
    let mut it = args.iter();
    let first = it.next().ok_or("no scenario given")?;
    if first == "-h" || first == "--help" {
        return Err(String::new());
    }
    let scenario = Scenario::parse(first).ok_or_else(|| format!("unknown scenario {first:?}"))?;
    let mut o = Opts {
        scenario,
        host: "127.0.0.1".into(),
        port: 11300,
        connections: 1,
        producers: 0,
        consumers: 0,
        pipeline: 1,
        body_size: 0,
        jobs: None,
        duration: None,
        rate: None,
        tubes: 1,
        window: None,
        delay: u32::from(scenario == Scenario::Delayed),
        pri: 1024,
        ttr: 120,
        server_pid: None,
        threads: 1,
        runtime: RuntimeKind::Current,
        stall: 10.0,
        timeout: 600.0,
        hold: 60.0,
        tls_ca: None,
    };
    let mut delay_given = false;
    while let Some(arg) = it.next() {
        if arg == "-h" || arg == "--help" {
            return Err(String::new());
        }
        let Some(flag) = arg.strip_prefix("--") else {
            return Err(format!("unexpected argument {arg:?}"));
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, v.to_string()),
            None => (
                flag,
                it.next()
                    .ok_or_else(|| format!("--{flag} needs a value"))?
                    .clone(),
            ),
        };
        let v = value.as_str();
        match name {
            "host" => o.host = value.clone(),
            "tls-ca" => o.tls_ca = Some(value.clone()),
            "port" => o.port = num(name, v)?,
            "connections" => o.connections = positive(name, v)?,
            "producers" => o.producers = positive(name, v)?,
            "consumers" => o.consumers = positive(name, v)?,
            "pipeline" => o.pipeline = positive(name, v)?,
            "body-size" => o.body_size = positive(name, v)?,
            "jobs" => o.jobs = Some(positive(name, v)?),
            "duration" => o.duration = Some(positive(name, v)?),
            "rate" => o.rate = Some(positive(name, v)?),
            "tubes" => o.tubes = positive(name, v)?,
            "window" => o.window = Some(num(name, v)?),
            "delay" => {
                o.delay = num(name, v)?;
                delay_given = true;
            }
            "pri" => o.pri = num(name, v)?,
            "ttr" => o.ttr = num(name, v)?,
            "server-pid" => o.server_pid = Some(positive(name, v)?),
            "threads" => o.threads = positive(name, v)?,
            "runtime" => {
                o.runtime = match v {
                    "current" => RuntimeKind::Current,
                    "multi" => RuntimeKind::Multi,
                    _ => return Err(format!("--runtime: {v:?} is not current or multi")),
                }
            }
            "stall" => o.stall = positive(name, v)?,
            "timeout" => o.timeout = positive(name, v)?,
            "hold" => o.hold = positive(name, v)?,
            _ => return Err(format!("unknown option --{name}")),
        }
    }
    if o.body_size == 0 {
        o.body_size = if scenario == Scenario::Big {
            65536
        } else {
            100
        };
    }
    if o.body_size < crate::body::HEADER_LEN {
        return Err(format!(
            "--body-size must be at least {} (the self-describing header)",
            crate::body::HEADER_LEN
        ));
    }
    if o.jobs.is_some() && o.duration.is_some() {
        return Err("give --jobs or --duration, not both".into());
    }
    if o.jobs.is_none() && o.duration.is_none() {
        o.jobs = Some(100_000);
    }
    if scenario == Scenario::ReserveDelete && o.jobs.is_none() {
        // The pre-fill needs a count; --duration then only caps the measured phase.
        o.jobs = Some(100_000);
    }
    if scenario.is_flow() {
        let given = o.producers + o.consumers;
        if o.producers == 0 {
            o.producers = if o.consumers > 0 && given > 0 {
                o.connections.saturating_sub(o.consumers).max(1)
            } else {
                o.connections.div_ceil(2)
            };
        }
        if o.consumers == 0 {
            o.consumers = o.connections.saturating_sub(o.producers).max(1);
        }
        o.connections = o.producers + o.consumers;
        if o.window.is_none() {
            o.window = Some(if scenario == Scenario::Delayed {
                0
            } else {
                2 * (o.producers + o.consumers) as u64 * o.pipeline as u64
            });
        }
    }
    if scenario == Scenario::Delayed && !delay_given {
        o.delay = 1;
    }
    if o.tubes > 1 && scenario != Scenario::ManyTubes {
        return Err("--tubes applies to many-tubes only".into());
    }
    Ok(o)
}

impl Opts {
    /// The parameters as JSON object members (without braces).
    pub fn json_params(&self, out: &mut String) {
        let opt_u = |v: Option<u64>| v.map_or("null".to_string(), |x| x.to_string());
        let opt_f = |v: Option<f64>| v.map_or("null".to_string(), |x| x.to_string());
        let _ = write!(
            out,
            "\"connections\":{},\"pipeline\":{},\"body_size\":{},\"jobs\":{},\"duration\":{},\
             \"rate\":{},\"tubes\":{},\"delay\":{}",
            self.connections,
            self.pipeline,
            self.body_size,
            opt_u(self.jobs),
            opt_f(self.duration),
            opt_f(self.rate),
            self.tubes,
            self.delay,
        );
        if self.scenario.is_flow() {
            let _ = write!(
                out,
                ",\"producers\":{},\"consumers\":{},\"window\":{}",
                self.producers,
                self.consumers,
                self.window.unwrap_or(0)
            );
        }
        let _ = write!(
            out,
            ",\"threads\":{},\"runtime\":\"{}\"",
            self.threads,
            match self.runtime {
                RuntimeKind::Current => "current",
                RuntimeKind::Multi => "multi",
            }
        );
    }
}
