//! Tables that the target's foreign keys tie together. A row may arrive
//! only once the row it references is committed, so a referenced table
//! is copied before the tables that reference it (each of their jobs
//! waits for its jobs, `pool.rs`), and a table that references itself is
//! copied by one COPY (its checks run at the end of the statement, so
//! its rows may come in any order) rather than in block ranges.

use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use super::plan::Planned;
use crate::error::Result;

/// For each plan (by index), the other plans whose target tables its
/// target table's foreign keys reference; a plan that references itself
/// is no longer copied in ranges.
pub(super) async fn references(dst: &Client, plans: &mut [Planned]) -> Result<Vec<Vec<usize>>> {
    let oids: Vec<Oid> = plans.iter().map(|p| p.target.oid).collect();
    let rows = dst
        .query(include_str!("../../sql/transfer_references.sql"), &[&oids])
        .await?;
    let mut deps = vec![Vec::new(); plans.len()];
    for r in &rows {
        let (from, to): (i32, i32) = (r.get(0), r.get(1));
        let (Ok(from), Ok(to)) = (usize::try_from(from), usize::try_from(to)) else {
            continue;
        };
        if from >= plans.len() || to >= plans.len() {
            continue;
        }
        if from == to {
            plans[from].ranged = false;
        } else if !deps[from].contains(&to) {
            deps[from].push(to);
        }
    }
    Ok(deps)
}

/// The order in which plans are copied: each referenced table before the
/// tables that reference it, otherwise the given order (largest first).
/// Tables in a cycle of references keep the given order (a row of one
/// may then meet a missing row of the other: the copy fails and says
/// so).
pub(super) fn referenced_first(deps: &[Vec<usize>]) -> Vec<usize> {
    let n = deps.len();
    let mut placed = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let ready = (0..n).find(|&i| !placed[i] && deps[i].iter().all(|&d| placed[d]));
        let next = ready.unwrap_or_else(|| (0..n).find(|&i| !placed[i]).unwrap_or(0));
        placed[next] = true;
        order.push(next);
    }
    order
}

/// Two plans that reference each other, directly or not, in `order`'s
/// numbering, given `deps` before [`reorder`]: a later plan that an
/// earlier one references. `--truncate` cannot empty one of them alone
/// and load it before the other.
pub(super) fn cycle(deps: &[Vec<usize>], order: &[usize]) -> Option<(usize, usize)> {
    let at = |plan: usize| order.iter().position(|&o| o == plan).unwrap_or(0);
    deps.iter()
        .enumerate()
        .find_map(|(from, to)| to.iter().find(|&&t| at(t) > at(from)).map(|&t| (from, t)))
}

/// `--truncate`'s statement for plan `i`: its table with every copied
/// table that references it, directly or not (PostgreSQL refuses to
/// empty a referenced table alone). Those are copied after it, each
/// emptying itself again in its own transaction.
pub(super) fn truncate_sql(plans: &[Planned], deps: &[Vec<usize>], i: usize) -> String {
    let names: Vec<String> = truncate_group(deps, i)
        .iter()
        .map(|&j| plans[j].target.truncated())
        .collect();
    format!("TRUNCATE {}", names.join(", "))
}

/// The plans that plan `i`'s `TRUNCATE` empties: itself and every plan
/// that references it, directly or not.
pub(super) fn truncate_group(deps: &[Vec<usize>], i: usize) -> Vec<usize> {
    let mut group = vec![i];
    let mut k = 0;
    while k < group.len() {
        let referenced = group[k];
        for (j, d) in deps.iter().enumerate() {
            if d.contains(&referenced) && !group.contains(&j) {
                group.push(j);
            }
        }
        k += 1;
    }
    group
}

/// With `--truncate`, which plans' targets were emptied by a committed
/// job (`done`: the plans whose job committed): a failed `TRUNCATE`, or a
/// job that failed, empties nothing.
pub(super) fn emptied(deps: &[Vec<usize>], done: impl Iterator<Item = usize>) -> Vec<bool> {
    let mut out = vec![false; deps.len()];
    for i in done {
        for j in truncate_group(deps, i) {
            out[j] = true;
        }
    }
    out
}

/// `plans` and their `blocks` in `order`, with `deps` renumbered to
/// match and kept only where they point to an earlier plan: a job waits
/// only for jobs queued before it, which are running or done (in a cycle
/// of references, waiting for a later one would wait forever).
pub(super) fn reorder(
    plans: Vec<Planned>,
    blocks: Vec<u64>,
    deps: Vec<Vec<usize>>,
    order: &[usize],
) -> (Vec<Planned>, Vec<u64>, Vec<Vec<usize>>) {
    let mut slots: Vec<Option<Planned>> = plans.into_iter().map(Some).collect();
    let plans = order.iter().filter_map(|&i| slots[i].take()).collect();
    let blocks = order.iter().map(|&i| blocks[i]).collect();
    let deps = renumber(&deps, order);
    (plans, blocks, deps)
}

/// `deps` in `order`'s numbering, each kept only if it points to an
/// earlier plan.
fn renumber(deps: &[Vec<usize>], order: &[usize]) -> Vec<Vec<usize>> {
    let mut at = vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        at[old] = new;
    }
    order
        .iter()
        .enumerate()
        .map(|(new, &i)| {
            deps[i]
                .iter()
                .map(|&d| at[d])
                .filter(|&d| d < new)
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{cycle, referenced_first, renumber};

    #[test]
    fn referenced_tables_come_first_and_the_rest_keep_their_order() {
        // 0 references 2, 2 references 3; 1 stands alone.
        let deps = vec![vec![2], vec![], vec![3], vec![]];
        assert_eq!(referenced_first(&deps), [1, 3, 2, 0]);
        assert_eq!(referenced_first(&[vec![], vec![]]), [0, 1]);
    }

    #[test]
    fn a_cycle_keeps_the_given_order_and_waits_only_backwards() {
        let deps = vec![vec![1], vec![0], vec![]];
        let order = referenced_first(&deps);
        assert_eq!(order, [2, 0, 1]);
        let kept = renumber(&deps, &order);
        assert_eq!(kept, [vec![], vec![], vec![1]]);
        assert_eq!(cycle(&deps, &order), Some((0, 1)));
        assert_eq!(cycle(&[vec![2], vec![], vec![]], &[2, 0, 1]), None);
    }
}
