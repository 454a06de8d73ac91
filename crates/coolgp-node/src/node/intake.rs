//! The data stream into the agent: rows are collected into blocks of `--batch` rows (or what
//! arrived before the stream went idle or ended), standardized and absorbed; the committed
//! stream position follows the absorbed blocks.

use coolgp::faer::Mat;
use tokio::sync::mpsc;

use super::{unix_ms, Node};
use crate::stream::Item;

impl Node {
    /// Pulls rows from the stream and absorbs up to `blocks_per_round` blocks.
    pub(super) fn pull_blocks(&mut self) -> usize {
        let mut absorbed = 0;
        while absorbed < self.s.blocks_per_round {
            let Some(rx) = self.intake.rx.as_mut() else {
                break;
            };
            let item = match rx.try_recv() {
                Ok(item) => item,
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.intake.rx = None;
                    break;
                }
            };
            absorbed += self.take(item);
        }
        absorbed
    }

    /// One item of the stream; returns the blocks it made the agent absorb (0 or 1).
    fn take(&mut self, item: Item) -> usize {
        let intake = &mut self.intake;
        match item {
            Item::Row { x, y, end } => {
                // Only a ROS 2 map reads it: no copy per row otherwise.
                if self.ros2.is_some() {
                    intake.latest_x = Some(x.clone());
                }
                intake.pending_x.push(x);
                intake.pending_y.push(y);
                intake.cursor.offset = end;
                intake.cursor.rows += 1;
                if intake.pending_y.len() >= self.s.batch {
                    return self.absorb_pending();
                }
                0
            }
            Item::Skipped { line, reason, end } => {
                intake.cursor.offset = end;
                intake.cursor.rows += 1;
                intake.cursor.rows_skipped += 1;
                if intake.pending_y.is_empty() {
                    intake.committed = intake.cursor.clone();
                }
                self.rejects_row(line, &reason);
                0
            }
            Item::Idle => self.absorb_pending(),
            Item::End => {
                let absorbed = self.absorb_pending();
                let intake = &mut self.intake;
                intake.cursor.ended = true;
                intake.committed = intake.cursor.clone();
                intake.rx = None;
                tracing::info!(rows = intake.cursor.rows, "data stream ended");
                absorbed
            }
            Item::Failed(e) => {
                tracing::error!(error = %e, "data stream failed; no more data will be read");
                intake.rx = None;
                0
            }
        }
    }

    fn rejects_row(&self, line: u64, reason: &str) {
        // Rows are user data, not peer messages: log them with the same once-a-minute limit.
        let skipped = self.intake.cursor.rows_skipped;
        let due = skipped == 1 || skipped.is_power_of_two();
        if due {
            tracing::warn!(line, reason, skipped, "skipped data row");
        }
    }

    /// Absorbs the pending rows as one block (standardized with `--standardize`); returns 1
    /// if the agent took it.
    fn absorb_pending(&mut self) -> usize {
        if self.intake.pending_y.is_empty() {
            return 0;
        }
        let rows = std::mem::take(&mut self.intake.pending_x);
        let mut y = std::mem::take(&mut self.intake.pending_y);
        let mut x = Mat::from_fn(rows.len(), self.inputs.layout.inputs.len(), |i, j| {
            rows[i][j]
        });
        if let Some(sc) = &self.inputs.scaler {
            if let Err(e) = sc.apply_x(&mut x) {
                tracing::error!(error = %e, "standardizing a block failed; block dropped");
                self.intake.committed = self.intake.cursor.clone();
                return 0;
            }
            for v in &mut y {
                *v = sc.scale_y(*v);
            }
        }
        let result = self.agent.handle_block(x.as_ref(), &y);
        self.intake.committed = self.intake.cursor.clone();
        match result {
            Ok(()) => {
                self.progress.last_block_unix_ms = Some(unix_ms());
                self.note_fused_change();
                self.progress.drain_events(&mut self.agent);
                if self.s.state.is_none() {
                    self.durability.acked_blocks = self.agent.blocks();
                    self.durability.acked_points = self.agent.n_own() as u64;
                }
                1
            }
            Err(e) => {
                tracing::error!(error = %e, rows = y.len(), "block rejected by the agent; dropped");
                0
            }
        }
    }
}
