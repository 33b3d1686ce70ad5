//! How the integration tests take their turns and name their steps: one module's tests at a
//! time, as when each file was its own binary, and each long test in named steps.

/// Which module's tests are running, and how many: see [`module`].
static RUNNING: std::sync::Mutex<(Option<&'static str>, usize)> = std::sync::Mutex::new((None, 0));
static TURN: std::sync::Condvar = std::sync::Condvar::new();

/// Held by a running test of module `name` (its `module_path!()`).
pub struct ModuleTurn;

/// Waits until no other module's test runs, then lets this one run: tests of one module run
/// beside each other (as libtest's threads allow), never beside another module's, as when each
/// file was its own test binary. The heavy tests (a real cluster, XDP on veths, image builds,
/// API servers, latency figures) rely on it.
pub fn module(name: &'static str) -> ModuleTurn {
    // `integration::kube_source::tests` and `integration::kube_source` are one module.
    let name = name.split("::").nth(1).unwrap_or(name);
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    while running.0.is_some_and(|m| m != name) {
        running = TURN.wait(running).unwrap_or_else(|p| p.into_inner());
    }
    running.0 = Some(name);
    running.1 += 1;
    ModuleTurn
}

impl Drop for ModuleTurn {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        running.1 -= 1;
        if running.1 == 0 {
            running.0 = None;
            TURN.notify_all();
        }
    }
}

/// The test's named steps: each is announced with the time the one before took, and a failure
/// names the step it happened in.
#[derive(Default)]
pub struct Steps {
    current: Option<(&'static str, std::time::Instant)>,
}

impl Steps {
    pub fn next(&mut self, name: &'static str) {
        self.finish();
        eprintln!("step {name}");
        self.current = Some((name, std::time::Instant::now()));
    }

    pub fn finish(&mut self) {
        if let Some((name, started)) = self.current.take() {
            eprintln!("step {name}: done in {:.1?}", started.elapsed());
        }
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some((name, _)) = &self.current {
                eprintln!("FAILED in step {name}");
            }
        } else {
            self.finish();
        }
    }
}
